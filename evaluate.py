"""`python evaluate.py` in a clone is `glimpse-evaluate` once installed: see glimpse/commands/evaluate.py, or run it with --help."""
import sys

from glimpse.commands.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
