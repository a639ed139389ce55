"""One Ember per user: a second launch hands its arguments to the first and exits.

``SingleInstance.start(argv)`` decides. The first launch takes a lock file and listens on a
local socket (a Unix socket, or a named pipe on Windows) and returns True; a later launch finds
the lock taken, connects, sends its arguments, waits for the answer and returns False, so its
caller exits. The first instance emits ``message_received(list[str])`` for each such message;
the app raises its window (``raise_window``) and opens any file it was given.

The lock file (QLockFile) decides who is first, so two launches at the same moment cannot both
win, and a crashed instance's lock is recognised as stale (its process is gone) and taken over,
with the socket it left behind. Arguments that name existing files are sent as absolute paths:
the first instance runs in another working directory.

Usage, before the main window is built::

    instance = SingleInstance()
    if not instance.start(sys.argv[1:]):
        return 0  # the running Ember got our arguments
    instance.message_received.connect(window.on_instance_message)
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QDir, QLockFile, QObject, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")  # a message is its length (4 bytes, big-endian), then UTF-8 JSON
_MAX_MESSAGE = 1 << 20
_ACK = b"\x06"


class SingleInstanceError(Exception):
    """Another Ember holds the lock but did not take the message (hung, or not answering)."""


def default_key(home: Path | None = None) -> str:
    """The instance key: one per user and per ``EMBER_HOME`` (tests, and people with two
    homes, get separate instances). Short, because it becomes a socket path."""
    if home is None:
        from app.config import paths

        home = paths().home
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name (containers): the uid still separates users
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    digest = hashlib.sha256(f"{user}\0{Path(home).resolve()}".encode()).hexdigest()[:16]
    return f"ember-{digest}"


def absolute_arguments(argv: Sequence[str], cwd: Path | None = None) -> list[str]:
    """``argv`` with every argument that names an existing file made absolute."""
    base = cwd or Path.cwd()
    result: list[str] = []
    for arg in argv:
        candidate = base / arg
        if arg and not arg.startswith("-") and candidate.exists():
            result.append(str(candidate.resolve()))
        else:
            result.append(arg)
    return result


def raise_window(window: QWidget) -> None:
    """Bring ``window`` to the front: un-minimise, raise, ask for focus."""
    if window.isMinimized():
        window.showNormal()
    window.show()
    window.raise_()
    window.activateWindow()


class SingleInstance(QObject):
    """The single-instance guard (see the module docstring). Lives on the GUI thread.

    Signals: ``message_received(list[str])``, in the first instance, once per later launch,
    with that launch's arguments (file paths made absolute).
    """

    message_received = Signal(list)

    def __init__(
        self, key: str | None = None, timeout_ms: int = 3000, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.key = key or default_key()
        self._timeout_ms = timeout_ms
        self._lock = QLockFile(QDir(QDir.tempPath()).filePath(f"{self.key}.lock"))
        self._lock.setStaleLockTime(0)  # stale only when its process is gone, never by age
        self._server: QLocalServer | None = None
        self._buffers: dict[QLocalSocket, bytes] = {}

    @property
    def is_primary(self) -> bool:
        return self._server is not None

    def start(self, argv: Sequence[str] = ()) -> bool:
        """True: this is the first instance and now listens. False: the first instance got
        ``argv``; exit. Raises SingleInstanceError if it holds the lock but does not answer."""
        if self._server is not None:
            return True
        if self._lock.tryLock(0):
            self._listen()
            return True
        self._send(absolute_arguments(argv))
        return False

    def close(self) -> None:
        """Stop listening and release the lock (at quit; also done when the process ends)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for socket in list(self._buffers):
            socket.abort()
        self._buffers.clear()
        if self._lock.isLocked():
            self._lock.unlock()

    def _listen(self) -> None:
        QLocalServer.removeServer(self.key)  # a crashed instance's socket file, if any
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.key):
            # Still the only Ember (we hold the lock); later launches will just open their own.
            log.warning("Single instance: cannot listen on %s: %s", self.key, server.errorString())
            return
        server.newConnection.connect(self._on_server_new_connection)
        self._server = server

    def _send(self, argv: list[str]) -> None:
        _allow_foreground_window()
        payload = json.dumps(argv).encode("utf-8")
        socket = QLocalSocket()
        # The first instance may hold the lock but not listen yet (it is starting): retry.
        for _attempt in range(max(1, self._timeout_ms // 200)):
            socket.connectToServer(self.key)
            if socket.waitForConnected(200):
                break
            socket.abort()
        else:
            raise SingleInstanceError(_not_answering(self._lock))
        socket.write(_HEADER.pack(len(payload)) + payload)
        answered = socket.waitForBytesWritten(self._timeout_ms) and (
            socket.bytesAvailable() > 0 or socket.waitForReadyRead(self._timeout_ms)
        )
        ok = answered and socket.read(1).data() == _ACK
        socket.disconnectFromServer()
        if not ok:
            raise SingleInstanceError(_not_answering(self._lock))

    @Slot()
    def _on_server_new_connection(self) -> None:
        server = self._server
        while server is not None and server.hasPendingConnections():
            socket = server.nextPendingConnection()
            self._buffers[socket] = b""
            socket.readyRead.connect(self._on_socket_ready_read)
            socket.disconnected.connect(self._on_socket_disconnected)
            self._read(socket)  # data may have arrived with the connection

    @Slot()
    def _on_socket_ready_read(self) -> None:
        socket = self.sender()
        if isinstance(socket, QLocalSocket):
            self._read(socket)

    @Slot()
    def _on_socket_disconnected(self) -> None:
        socket = self.sender()
        if isinstance(socket, QLocalSocket):
            self._buffers.pop(socket, None)
            socket.deleteLater()

    def _read(self, socket: QLocalSocket) -> None:
        if socket not in self._buffers:
            return
        buffer = self._buffers[socket] + socket.readAll().data()
        self._buffers[socket] = buffer
        if len(buffer) < _HEADER.size:
            return
        (size,) = _HEADER.unpack_from(buffer)
        if size > _MAX_MESSAGE:
            log.warning("Single instance: dropped an oversized message (%d bytes)", size)
            socket.abort()
            return
        if len(buffer) < _HEADER.size + size:
            return
        body = buffer[_HEADER.size : _HEADER.size + size]
        self._buffers[socket] = b""
        try:
            argv = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            argv = None
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            log.warning("Single instance: dropped a malformed message")
            socket.abort()
            return
        socket.write(_ACK)
        socket.flush()
        self.message_received.emit(argv)


def _not_answering(lock: QLockFile) -> str:
    pid = lock.getLockInfo()[0]
    who = f" (process {pid})" if pid else ""
    return (
        f"Ember is already running{who} but does not answer. Close it, or end it in the "
        "task manager, and start Ember again."
    )


def _allow_foreground_window() -> None:
    """Windows lets only the foreground process hand focus on: this launch has it (the user
    just started it), so it allows the running Ember to raise its window."""
    if sys.platform == "win32":
        import ctypes

        asfw_any = -1
        ctypes.windll.user32.AllowSetForegroundWindow(asfw_any)  # type: ignore[attr-defined]
