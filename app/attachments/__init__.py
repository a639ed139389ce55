"""Attached files: their text (extract), their copy in EMBER_HOME (store), and what of them
goes before a question, whole or retrieved (context). No Qt here: the GUI runs these on a
worker thread and shows their progress and errors."""
