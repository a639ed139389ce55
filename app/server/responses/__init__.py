"""OpenAI's Responses API (``/v1/responses``) as an adapter over the chat path.

``schemas`` parses the body and its input items, ``translate`` turns them (after the stored
conversation of ``previous_response_id``) into the one chat body the engine path takes,
``shapes`` builds the response object and its items, ``answer`` writes the semantic stream
events (or the whole response), and ``store`` keeps responses in EMBER_HOME. The routes are in
app/server/routes/responses.py.
"""
