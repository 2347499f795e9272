"""Shared command-line conventions: a bad input is one line on stderr and exit code 2; Ctrl-C is
one line and exit code 130."""
from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

BAD_INPUT = 2
INTERRUPTED = 130
MAX_THREADS = 1024  # far beyond any machine; torch's thread pool crashes the process (not an error) on absurd counts


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose errors (an unknown choice, a value of the wrong type, an unknown
    flag) are one line and exit code 2, like every other bad input here, not the whole usage."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def interruptible(main):
    """Decorates a command's ``main(argv)``: Ctrl-C ends it with one line on stderr and exit code
    130, not a traceback. (Commands with something to resume say more themselves.)"""
    @functools.wraps(main)
    def wrapped(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except KeyboardInterrupt:
            print("\ninterrupted", file=sys.stderr)
            return INTERRUPTED
    return wrapped


def int_list(text: str) -> tuple[int, ...]:
    """argparse type of a list option: comma-separated positive integers ("1,2,4")."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def check_threads(threads: int, zero_means_default: bool = False) -> int:
    """``threads`` for ``--threads`` (0 allowed where it means torch's default); ValueError otherwise."""
    low = 0 if zero_means_default else 1
    if not low <= threads <= MAX_THREADS:
        raise ValueError(f"--threads must be between {low} and {MAX_THREADS}, got {threads}")
    return threads


def npz_path(path: Path) -> Path:
    """``path`` for an ``--out`` .npz: a file name ending in .npz (numpy would add the suffix
    silently), not a directory; ValueError otherwise."""
    if not str(path) or path.suffix != ".npz" or path.is_dir():
        raise ValueError(f"--out must name a .npz file, got {str(path)!r}")
    return path


def write_atomically(path: Path, write) -> None:
    """Write ``path`` in one step: ``write(file)`` fills a binary file beside it, which is synced to
    disk and renamed over it, so an interrupted or failed write (a full disk, a kill) leaves no torn
    file and an existing one as it was. The file keeps the mode it had (a new one: readable by all,
    as a shared file should be; mkstemp's are private)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """``text`` to ``path`` as UTF-8, atomically (:func:`write_atomically`): a report or README
    being rewritten is never left half written."""
    write_atomically(path, lambda file: file.write(text.encode()))


def write_npz(path: Path, **arrays) -> None:
    """The arrays, compressed, to ``path``, atomically (:func:`write_atomically`)."""
    import numpy as np

    write_atomically(path, lambda file: np.savez_compressed(file, **arrays))


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
        write_text(path, new)
    return new
