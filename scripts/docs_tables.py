"""Write the tables of the docs that come from the registry (docs/training.md's families table).

    python scripts/docs_tables.py           # says whether the docs are up to date (exit 1 if not)
    python scripts/docs_tables.py --write   # rewrites the blocks
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glimpse.cli import ArgumentParser, replace_block, write_text
from glimpse.models.registry import families_table

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = {ROOT / "docs" / "training.md": ("<!-- families:start -->", "<!-- families:end -->", families_table)}


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the blocks instead of checking them")
    args = parser.parse_args(argv)
    stale = []
    for path, (start, end, make) in BLOCKS.items():
        text = path.read_text()
        new = replace_block(path, start, end, make(), text=text)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if args.write:
                write_text(path, new)
    if stale and not args.write:
        print(f"out of date: {', '.join(map(str, stale))} (python scripts/docs_tables.py --write)")
        return 1
    print("written" if stale else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
