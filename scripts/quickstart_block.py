"""Run the README's Quickstart command for real and write what it printed into the README.

    python scripts/quickstart_block.py --data-dir DIR           # print the block
    python scripts/quickstart_block.py --data-dir DIR --write   # and replace README.md's block

It runs ``python train.py --data-dir DIR`` (RAM on 60x60 cluttered MNIST, 5 epochs: the first
command of the Quickstart) in a temporary run directory, keeps the lines it ends with, writes the
data folder as DIR and the run's time stamp as DATE-TIME, and says under the block which machine,
how many torch threads and which commit produced it. The accuracies are the same on every run of
one machine and torch build (seeded); the seconds are this machine's, at that moment.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glimpse.cli import ArgumentParser, fail, interruptible, replace_block

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- quickstart:start -->", "<!-- quickstart:end -->"


def run_quickstart(data_dir: str) -> list[str]:
    """The last lines of the quickstart's output; ValueError with train.py's own message if it failed."""
    with tempfile.TemporaryDirectory() as runs:
        # train.py's stderr (its progress bar) passes through as it comes; its stdout is the block
        with subprocess.Popen([sys.executable, "train.py", "--data-dir", data_dir, "--run-dir", runs],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as done:
            tail = ""
            for chunk in iter(lambda: done.stderr.read(256), ""):
                sys.stderr.write(chunk)
                tail = (tail + chunk)[-4000:]
            out = done.stdout.read()
        if done.returncode:
            said = [line for line in re.split(r"[\r\n]", tail) if line.strip()][-1:] or ["no message"]
            raise ValueError(f"train.py exited {done.returncode}: {said[0]}")
        lines = [line for line in out.splitlines() if line.strip()][-4:]
        return [re.sub(r"\d{8}-\d{6}", "DATE-TIME", line.replace(runs, "runs").replace(data_dir, "DIR"))
                for line in lines]


def block(lines: list[str]) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    import torch

    return "\n".join(["```text", *lines, "```", "",
                      f"(Made by `python scripts/quickstart_block.py --data-dir DIR --write` on {time.strftime('%Y-%m-%d')}, commit {commit}: "
                      f"{platform.machine()}, {os.cpu_count()} CPU cores, 1 torch thread, torch {torch.__version__}. "
                      f"The accuracies repeat on the same machine and torch build; the seconds depend on what else "
                      f"the machine was doing, and another CPU or torch build may round differently.)"])


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="a folder holding MNIST/raw (full MNIST)")
    parser.add_argument("--write", action="store_true", help="replace README.md's quickstart block")
    args = parser.parse_args(argv)
    try:
        text = block(run_quickstart(os.path.abspath(args.data_dir)))
    except ValueError as exc:
        return fail(exc)
    print(text)
    if args.write:
        replace_block(ROOT / "README.md", START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
