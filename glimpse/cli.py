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


def option_flags(options: dict) -> list[str]:
    """Options (name -> value) as command-line words: ``--name value``, ``--flag`` for True,
    ``--no-flag`` for False, nothing for None. The one place a config turns back into a command."""
    words = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is False:
            words.append("--no-" + flag[2:])
        elif value is not None:
            words += [flag, str(value)]
    return words


def replace_block(path, start: str, end: str, body: str, text: str | None = None) -> str:
    """The file at ``path`` (or ``text``) with what stands between the markers ``start`` and ``end``
    replaced by ``body``; written back when ``text`` is None. ValueError when a marker is missing."""
    content = path.read_text() if text is None else text
    if start not in content or end not in content:
        raise ValueError(f"{path} has no {start} ... {end} block to replace")
    head, rest = content.split(start, 1)
    new = f"{head}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
    if text is None:
        path.write_text(new)
    return new
