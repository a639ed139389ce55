"""Tools in chat: MCP servers (Model Context Protocol), run with the user's permission.

- :mod:`app.tools.config`: ``mcp.json`` in EMBER_HOME, in the ``{"mcpServers": {...}}`` shape of
  Claude Desktop, Cursor and Jan; secrets in env and headers go to the keyring.
- :mod:`app.tools.transport`: stdio and Streamable HTTP transports with size limits.
- :mod:`app.tools.manager`: one connection per server on its own asyncio loop thread (started
  on first use, restarted with backoff after a crash, stopped at quit), list and call tools.
- :mod:`app.tools.results`: a tool result as text for the model (bounded) and parts for people.
- :mod:`app.tools.loop`: the tool-calling loop (ask, approve, run, append, answer).

No Qt here: the terminal (``ember run --mcp``) and the app share all of it.
"""
