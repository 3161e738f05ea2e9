"""Text from a kernel, a device or a data file, made safe for every report.

A kernel's error text may hold what no report can carry: bytes that are not UTF-8 (decoded
with ``surrogateescape`` they are lone surrogates, which no UTF-8 writer accepts: summary.md,
index.html and results.parquet were lost to one), and control characters (NUL, ESC sequences
that recolour a terminal, a carriage return that hides a line). :func:`clean` shows each as
an escape (``\\udcff``, ``\\x1b``); tab and newline are kept. Results rows are cleaned when
written and again when read (reports/results.py), so every reporter gets clean text.
:func:`md_cell` makes text one cell of a Markdown table.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL, C1 controls, lone surrogates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text: Any) -> str:
    """``text`` as a str with every control character (tab, newline kept) and undecodable
    character escaped."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s


def clean_tree(obj: Any) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings, numbers) with every string, keys included, cleaned."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean(k) if isinstance(k, str) else k: clean_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_tree(v) for v in obj]
    return obj


# (a link or image needs "](": its "]" escaped is enough, and "[0, 3]" stays as it reads)
_MD = re.compile(r"([\\`*<|]|\](?=[(\[]))")


def md_cell(text: Any) -> str:
    """``text`` as Markdown text, also good for one table cell: cleaned, and the characters that
    make a link, image, HTML tag, code span, emphasis or column break escaped; line breaks as
    spaces."""
    return _MD.sub(lambda m: "\\" + m.group(), clean(text)).replace("\n", " ").replace("\t", " ")


def md_code(text: Any) -> str:
    """``text`` as a Markdown code span (a command to copy): no backtick can end it early, no
    ``|`` break a table's row."""
    return "`" + clean(text).replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"
