"""`python train.py` in a clone is `glimpse-train` once installed: see glimpse/commands/train.py, or run it with --help."""
import sys

from glimpse.commands.train import main

if __name__ == "__main__":
    sys.exit(main())
