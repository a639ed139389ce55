"""Python run in a fresh interpreter by the import tests: the real window opened as ``ember``
opens it, on services over the test's EMBER_HOME (``OPEN_WINDOW``), then closed
(``CLOSE_WINDOW``)."""

OPEN_WINDOW = """
import sys
from app.ui.app import create_application
from app.ui.main_window import MainWindow
from app.ui.services import create_services
app = create_application()
services = create_services()
window = MainWindow(services)
window.show()
app.processEvents()
"""

CLOSE_WINDOW = """
window.close()
services.close()
"""
