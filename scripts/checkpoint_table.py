"""Score every checkpoint in checkpoints/ and print the README's results table (markdown).

    python scripts/checkpoint_table.py --data-dir DIR           # print the table
    python scripts/checkpoint_table.py --data-dir DIR --write   # checkpoints/scores.json + README
    python scripts/checkpoint_table.py --commands-only --write                 # rebuild the commands only

The work is glimpse/scores.py's; this is its command line.
"""
import sys

from glimpse.scores import main

if __name__ == "__main__":
    sys.exit(main())
