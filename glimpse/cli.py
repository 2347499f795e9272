"""Shared command-line conventions: a bad input is one line on stderr and exit code 2."""
from __future__ import annotations

import sys

BAD_INPUT = 2


def fail(exc: BaseException) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return BAD_INPUT
