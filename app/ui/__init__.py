"""The desktop app (PySide6). ``app.ui.app.run_gui()`` opens it."""

from app.ui.compat import protect_immortals

protect_immortals()
