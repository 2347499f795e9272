"""Shared command-line conventions: a bad input is one line on stderr and exit code 2."""
from __future__ import annotations

import sys

BAD_INPUT = 2


def markdown_table(header, rows, pad: bool = False) -> str:
    """A Markdown table of ``header`` and ``rows`` (cells made str); ``pad`` aligns the columns
    for reading in a terminal."""
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))] if pad else [0] * len(header)
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) if pad else "---" for w in widths) + "|")
    return "\n".join(lines)


def fail(exc: BaseException) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return BAD_INPUT
