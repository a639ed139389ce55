"""The one rule for which encodings a file may name (an HTML page's ``<meta charset>``): only
the text encodings of the web (the WHATWG Encoding Standard's, by Python's codec names), each
decoded by a codec that is linear and takes ``errors="replace"``.

Python's codec registry also holds codecs that are no text encoding (``rot13``, ``zlib``,
``base64``: a traceback), ones that refuse ``replace`` (``idna``), and slow ones (``punycode``
decoded 1.3 MB for more than 75 s); a file never gets to choose those.
"""

from __future__ import annotations

import codecs

# Python's names (codecs.lookup(...).name) of the encodings web pages are written in
TEXT_ENCODINGS = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "ascii",
        "cp866",
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        "gbk",
        "gb2312",
        "gb18030",
        "big5",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "shift_jis",
        "cp932",
        "euc_kr",
        "cp949",
        *(f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16)),
        *(f"cp{n}" for n in range(1250, 1259)),
    }
)
ALIASES = {"windows-874": "cp874", "x-mac-cyrillic": "mac-cyrillic"}  # web names Python lacks
MAX_NAME_CHARS = 40


def text_codec(name: str) -> codecs.CodecInfo | None:
    """The codec of the text encoding ``name`` names, or None when it names none (or a codec
    that is not a text encoding of the web): the caller falls back to UTF-8."""
    name = name.strip().lower()
    if not name or len(name) > MAX_NAME_CHARS:
        return None
    try:
        codec = codecs.lookup(ALIASES.get(name, name))
    except (LookupError, ValueError):
        return None
    return codec if codec.name in TEXT_ENCODINGS else None
