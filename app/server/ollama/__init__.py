"""Ollama's API on Ember's server: the routes (routes.py, manage.py), the conversion of its
bodies into the OpenAI routes' (convert.py), its shapes (shapes.py, answers.py)."""

OLLAMA_PORT = 11434  # Ollama's own port (kept here: the GUI's settings need it without FastAPI)
