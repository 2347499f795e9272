"""`python report.py` in a clone is `glimpse-report` once installed: see glimpse/commands/report.py, or run it with --help."""
import sys

from glimpse.commands.report import main

if __name__ == "__main__":
    sys.exit(main())
