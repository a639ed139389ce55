"""``ember mcp add|import|ls|test|rm``: MCP servers whose tools models may call.

Also home of what ``ember run --mcp NAME`` needs on a terminal: asking before a server's command
line first runs and before each call (:func:`terminal_tools`).
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from app.cli import COMMANDS, CliError
from app.safe_text import terminal_text
from app.tools.config import McpConfig, ServerConfig, ToolConfigError
from app.tools.manager import ToolError, ToolManager


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help=COMMANDS["mcp"],
        description="MCP servers (Model Context Protocol) whose tools a model may call with "
        "`ember run MODEL --mcp NAME`. They are kept in mcp.json in Ember's data folder, in the "
        "shape Claude Desktop, Cursor and Jan use.",
    )
    p.set_defaults(func=_list)
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    add = actions.add_parser(
        "add",
        help="add a server",
        description="Add a server run as a command (`ember mcp add time -- uvx mcp-server-time`) "
        "or reached over HTTP (`ember mcp add search --url https://…/mcp`). Env variables and "
        "headers that look secret (…KEY, …TOKEN, Authorization, …) are kept in the OS keyring.",
    )
    add.add_argument("name", metavar="NAME", help="letters, digits, '-', '_' and '.'")
    add.add_argument("argv", nargs="*", metavar="COMMAND [ARGS…]", help="after `--`")
    add.add_argument("--url", help="a Streamable HTTP server's URL instead of a command")
    add.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="(repeatable)"
    )
    add.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="(repeatable)"
    )
    add.add_argument("--cwd", metavar="DIR", help="the folder the command runs in")
    add.add_argument("--replace", action="store_true", help="replace a server of that name")
    add.set_defaults(func=_add)

    imp = actions.add_parser(
        "import",
        help="add the servers of a Claude Desktop, Cursor or Jan config file",
        description='Add the servers of a file with an "mcpServers" object. Each command line '
        "is shown before it first runs.",
    )
    imp.add_argument("file", metavar="FILE", type=Path)
    imp.add_argument("--replace", action="store_true", help="replace servers of the same name")
    imp.set_defaults(func=_import)

    ls = actions.add_parser("ls", help="list servers", description="List the servers.")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=_list)

    test = actions.add_parser(
        "test",
        help="start a server and list its tools",
        description="Connect to the server and list its tools with their descriptions and input "
        "schemas. A command line not run before is shown first and needs a yes.",
    )
    test.add_argument("name", metavar="NAME")
    test.add_argument("-y", "--yes", action="store_true", help="run its command without asking")
    test.set_defaults(func=_test)

    rm = actions.add_parser("rm", help="remove a server", description="Remove a server.")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=_remove)


def _pairs(items: list[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, found, value = item.partition(sep)
        if not found or not name.strip():
            raise CliError(f"{what} needs 'NAME{sep}VALUE', not {item!r}.")
        out[name.strip()] = value.strip() if sep == ":" else value
    return out


def _add(args: argparse.Namespace) -> int:
    if bool(args.url) == bool(args.argv):
        raise CliError(
            "Give a command after `--` (ember mcp add NAME -- COMMAND [ARGS…]) or --url URL."
        )
    config = McpConfig()
    if args.url:
        server = ServerConfig(args.name, url=args.url, headers=_pairs(args.header, ":", "--header"))
    else:
        command, *rest = args.argv
        server = ServerConfig(
            args.name,
            command=command,
            args=tuple(rest),
            env=_pairs(args.env, "=", "--env"),
            cwd=args.cwd,
        )
        # The person typed this command line: it is what they agreed to run.
        server = ServerConfig(**{**_fields(server), "approved_command": server.command_line})
    server = config.add(server, replace=args.replace)
    print(f"Added {server.name}: {server.target}")
    env_secrets, header_secrets = server.secret_keys()
    if env_secrets or header_secrets:
        where = "the OS keyring" if config.secrets.kind == "keyring" else "secrets.json"
        print(f"Kept in {where}: {', '.join(env_secrets + header_secrets)}", file=sys.stderr)
    return 0


def _fields(server: ServerConfig) -> dict[str, Any]:
    return {f: getattr(server, f) for f in ServerConfig.__dataclass_fields__}


def _import(args: argparse.Namespace) -> int:
    added = McpConfig().import_file(args.file, replace=args.replace)
    if not added:
        print("Nothing to add: every server in that file is here already (--replace replaces).")
        return 0
    print(f"Added {len(added)} server{'s' if len(added) != 1 else ''}: {', '.join(added)}")
    print("Each command line is shown before it first runs (`ember mcp test NAME`).")
    return 0


def _list(args: argparse.Namespace) -> int:
    config = McpConfig()
    servers = config.list()
    problems = config.problems()
    for problem in problems.values():  # the other servers are listed and work meanwhile
        print(f"ember: error: {terminal_text(problem)}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({s.name: s.to_json() for s in servers}, indent=2))
        return 1 if problems else 0
    if not servers:
        if not problems:
            print("No MCP servers yet. Add one with `ember mcp add NAME -- COMMAND [ARGS…]`.")
        return 1 if problems else 0
    table = [("NAME", "KIND", "STATE", "RUNS")] + [
        (
            s.name,
            s.kind,
            "off" if not s.enabled else "not approved" if s.needs_approval else "on",
            s.target,
        )
        for s in servers
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        cells = [cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]).rstrip())
    return 1 if problems else 0


def _test(args: argparse.Namespace) -> int:
    config = McpConfig()
    server = config.get(args.name)
    approve_command(config, server, args.yes)
    manager = ToolManager(config)
    try:
        tools = manager.list_tools(server.name)
    except ToolError as e:
        raise CliError(str(e)) from None
    finally:
        manager.shutdown()
    print(f"{server.name} ({server.target}): {len(tools)} tool{'s' if len(tools) != 1 else ''}")
    for tool in tools:  # names, descriptions and schemas are the server's: shown escaped
        state = "" if server.tool_enabled(tool.name) else "  (off)"
        print(f"\n{terminal_text(tool.name)}{state}")
        if tool.description:
            print("  " + terminal_text(tool.description.strip(), lines=True))
        print("  input: " + terminal_text(json.dumps(tool.input_schema, ensure_ascii=False)))
    return 0


def _remove(args: argparse.Namespace) -> int:
    server = McpConfig().remove(args.name)
    print(f"Removed {args.name}" + (f" ({terminal_text(server.target)})." if server else "."))
    return 0


# ---- for `ember run --mcp` ---------------------------------------------------------------------


def _ask(question: str, stream: TextIO = sys.stderr) -> str:
    """One answer typed on the terminal; empty at end of input."""
    stream.write(question)
    stream.flush()
    line = sys.stdin.readline()
    return line.strip().lower()


def approve_command(config: McpConfig, server: ServerConfig, yes: bool) -> None:
    """Show a stdio server's command line before it first runs; it runs only after a yes."""
    if not server.needs_approval:
        return
    # exactly what runs, each argument quoted and its control characters escaped: no part of
    # the line can rewrite what the terminal shows of another
    print(f"MCP server {server.name} runs this command:\n  {server.shown_command}", file=sys.stderr)
    if server.cwd:
        print(f"  in {terminal_text(server.cwd)}", file=sys.stderr)
    if not yes and _ask("Run it? [y/N] ") not in ("y", "yes"):
        raise CliError(f"Not running {server.name}: its command line was not approved.")
    try:
        config.approve_command(server.name, seen=server.command_line)
    except ToolConfigError as e:
        raise CliError(str(e)) from None


def server_names(spec: str) -> list[str]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise CliError("--mcp needs the names of MCP servers (see `ember mcp ls`).")
    try:
        config = McpConfig()
        for name in names:
            config.get(name)
    except ToolConfigError as e:
        raise CliError(str(e)) from None
    return names


class TerminalHooks:
    """The loop's hooks on a terminal: each call and its result on stderr, the answer on
    stdout, and a question before each call unless ``yes`` (``ask``: on the main thread)."""

    SHOWN_CHARS = 2000

    def __init__(self, yes: bool) -> None:
        self.yes = yes

    def ask(self, call: Any) -> Any:
        tool, server = terminal_text(call.tool), terminal_text(call.server)
        answer = _ask(f"Allow {tool} ({server})? [y]es once, [a]lways, [N]o: ")
        return {"y": "once", "yes": "once", "a": "always", "always": "always"}.get(answer, "deny")

    def on_text(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def on_call(self, call: Any) -> None:
        arguments = terminal_text(call.arguments.strip() or "{}")
        print(f"\n→ {terminal_text(call.name)} {arguments}", file=sys.stderr)

    def on_result(self, call: Any) -> None:
        output = call.output
        text = (
            output.text
            if len(output.text) <= self.SHOWN_CHARS
            else (output.text[: self.SHOWN_CHARS] + f"… ({len(output.text):,} characters)")
        )
        mark = "✗" if output.is_error else "←"
        print(f"{mark} {terminal_text(text, lines=True)}", file=sys.stderr)


@dataclass(slots=True)
class _Question:
    """A call the loop thread asks the main thread about (only it gets Ctrl+C)."""

    call: Any
    answered: threading.Event = field(default_factory=threading.Event)
    decision: str = "deny"


class TerminalTools:
    """``ember run MODEL --mcp NAMES``: the servers, started once for the whole session, and
    one answer with tools at a time. The loop runs on its own thread; the main thread asks the
    questions, so Ctrl+C at any point (writing, asking, running a call) ends the answer."""

    def __init__(self, worker: Any, loaded: Any, sampling: Any, args: argparse.Namespace) -> None:
        from app.config import Settings

        names = server_names(args.mcp)
        self.config = McpConfig()
        for name in names:
            approve_command(self.config, self.config.get(name), args.yes)
        settings = Settings()
        self.manager = ToolManager(self.config)
        self.hooks = TerminalHooks(args.yes)
        self.worker, self.loaded, self.sampling, self.args = worker, loaded, sampling, args
        self.timeout = float(settings.get("tools.timeout"))
        self.max_rounds = int(settings.get("tools.max_rounds"))
        try:
            self.toolbox = self.manager.toolbox(names)
        except ToolError as e:
            self.manager.shutdown()
            raise CliError(str(e)) from None
        except BaseException:  # Ctrl+C while the servers start: stop them on the way out
            self.manager.shutdown()
            raise

    def answer(self, messages: list[Any]) -> Any:
        """Answer ``messages`` with the tools; returns the LoopResult."""
        from app.tools.loop import LoopHooks, LoopResult, ToolLoop

        hooks = self.hooks
        inbox: queue.Queue[_Question | None] = queue.Queue()
        asked: list[_Question] = []  # a Ctrl+C answers them all, wherever it lands

        def approve(call: Any) -> Any:  # on the loop thread
            if hooks.yes:
                return "once"
            question = _Question(call)
            asked.append(question)
            if loop.control.cancelled:
                return "deny"
            inbox.put(question)
            question.answered.wait()
            return question.decision

        loop = ToolLoop(
            self.worker,
            self.manager,
            self.toolbox,
            LoopHooks(approve, hooks.on_text, hooks.on_call, hooks.on_result),
            sampling=self.sampling,
            model=self.loaded.model_id,
            chat_template=self.loaded.chat_template,
            tool_choice=self.args.tool_choice,
            timeout=self.timeout,
            max_rounds=self.max_rounds,
        )
        results: list[LoopResult] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                results.append(loop.run(messages))
            except BaseException as e:  # reported on the main thread
                failure.append(e)
            finally:
                inbox.put(None)

        thread = threading.Thread(target=run, name="tool-loop", daemon=True)
        thread.start()
        while True:
            question: _Question | None = None
            try:
                question = inbox.get()
                if question is None:
                    break
                question.decision = hooks.ask(question.call)
                question.answered.set()
            except KeyboardInterrupt:
                if question is not None:  # at the prompt: the line ends here
                    print(file=sys.stderr)
                loop.control.cancel()  # the call asked about is refused with it
                for waiting in list(asked):
                    waiting.answered.set()
        while thread.is_alive():
            try:
                thread.join()
            except KeyboardInterrupt:
                loop.control.cancel()
        if failure:
            raise failure[0]
        return results[0]

    def close(self) -> None:
        self.manager.shutdown()


def run_with_tools(
    worker: Any, loaded: Any, messages: list[Any], sampling: Any, args: argparse.Namespace
) -> Any:
    """``ember run MODEL --mcp NAMES PROMPT``: one answer with the servers' tools; returns its
    final event."""
    tools = TerminalTools(worker, loaded, sampling, args)
    try:
        return tools.answer(messages).final
    finally:
        tools.close()
