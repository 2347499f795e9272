"""Write docs/leaderboard.md from the lab's scores, saved benchmark results and published numbers.

    python scripts/leaderboard.py            # says whether the page is up to date (exit 1 if not)
    python scripts/leaderboard.py --write    # writes it

The work is glimpse/leaderboard.py's; this is its command line.
"""
import argparse
import sys

from glimpse.cli import ArgumentParser, fail, interruptible
from glimpse.leaderboard import PAGE, write


@interruptible
def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the page instead of checking it")
    args = parser.parse_args(argv)
    try:
        fresh = write(check_only=not args.write)
    except ValueError as exc:
        return fail(exc)
    except OSError as exc:  # a file of the page's missing or unreadable, or the page not writable
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{PAGE.name}: {'up to date' if fresh else ('written' if args.write else 'out of date (--write)')}")
    return 0 if fresh or args.write else 1


if __name__ == "__main__":
    sys.exit(main())
