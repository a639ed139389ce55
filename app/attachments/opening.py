"""Opening a file someone attached: only a regular file is read.

A FIFO attached as ``notes.txt`` blocked the reader for good (opening one waits for a writer,
reading it waits for data), and a device never ends. The file is opened without waiting
(``O_NONBLOCK``) and refused unless it is a regular file, before a byte of it is read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)  # a terminal device never becomes ours
    | getattr(os, "O_BINARY", 0)
)


def open_regular(path: Path | str) -> BinaryIO:
    """``path`` open for reading in binary; IsADirectoryError for a folder, OSError (EINVAL)
    for a pipe, socket or device, before anything is read."""
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "it is a folder", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file: a pipe, socket or device", str(path))
        if _FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
