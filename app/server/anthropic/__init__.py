"""The Anthropic Messages API (``POST /v1/messages``, ``POST /v1/messages/count_tokens``): an
adapter over the engine path every protocol shares (app/server/answering.py). The routes are
in app/server/routes/anthropic.py."""
