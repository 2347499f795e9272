"""The one-off paired tests the guides quote ("47 to 41, p = 0.59"), each stored with the command
that measured it, so that tests/test_docs_numbers.py can check every such quote against a result.

    python scripts/comparisons.py --data-dir DIR --add A.pt B.pt                         # fixed test canvases
    python scripts/comparisons.py --data-dir DIR --add A.pt B.pt --canvas-seed 20261123  # fresh canvases
    python scripts/comparisons.py --data-dir DIR --check   # score every stored pair again, say what changed

Pairs on the converged report's canvases come from its records (reports/converged/records) and the
shipped checkpoints' from checkpoints/scores.json; reports/comparisons.json holds the rest (fresh
canvases, unfinished runs). Each pair is scored as `evaluate.py --checkpoint A --against B` scores it
(glimpse.evaluation.compare_checkpoints), and both checkpoints must lie in the clone, so that anyone
can score it again. Each pair also stores a digest of both files, so that a checkpoint replaced
under the same name (a new run shipped) shows as such in --check and in tests/test_docs_numbers.py.
Exit code 1 when --check finds a stored pair that reads otherwise now.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envs.data import DataError
from glimpse.checkpoint import CheckpointError
from glimpse.cli import ArgumentParser, check_threads, fail, interruptible, write_text
from glimpse.evaluation import compare_checkpoints
from glimpse.report.records import file_sha256
from glimpse.scores import ROOT
from glimpse.cpu import configure_cpu

LEDGER = ROOT / "reports" / "comparisons.json"


def in_clone(path: Path) -> str:
    """``path`` relative to the clone (as the ledger and its commands name it); ValueError outside it."""
    resolved = path.resolve()
    if not resolved.is_file():
        raise ValueError(f"{path} is not a file")
    if not resolved.is_relative_to(ROOT):
        raise ValueError(f"{path} is outside the clone {ROOT}: a stored comparison must be one anyone can score again")
    return str(resolved.relative_to(ROOT))


def digest(path: str) -> str:
    """The first 16 hex digits of the SHA-256 of the file at ``path`` (relative to the clone)."""
    return file_sha256(ROOT / path)[:16]


def measure(a: str, b: str, canvas_seed: int | None, data_dir: str | None) -> dict:
    """One stored pair: both checkpoints on the same canvases, McNemar's exact test, the command."""
    test = compare_checkpoints(ROOT / a, ROOT / b, data_dir=data_dir, canvas_seed=canvas_seed)
    command = f"python evaluate.py --checkpoint {a} --against {b}"
    if canvas_seed is not None:
        command += f" --canvas-seed {canvas_seed}"
    return {"a": a, "b": b, "digest_a": digest(a), "digest_b": digest(b), "canvas_seed": canvas_seed,
            "canvas_hash": test["a"]["canvas_hash"], "error_a": test["a"]["error"], "error_b": test["b"]["error"],
            "only_a": test["only_a"], "only_b": test["only_b"], "p": test["p"], "command": command}


def same_pair(entry: dict, a: str, b: str, canvas_seed: int | None) -> bool:
    return {entry["a"], entry["b"]} == {a, b} and entry["canvas_seed"] == canvas_seed


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--add", nargs=2, action="append", metavar=("A", "B"), default=[],
                        help="score checkpoint A against B and store the result (again: replaces it)")
    parser.add_argument("--canvas-seed", type=int, default=None,
                        help="with --add: on fresh canvases of this seed (as evaluate.py --canvas-seed)")
    parser.add_argument("--check", action="store_true", help="score every stored pair again")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    try:
        configure_cpu(check_threads(args.threads))
        if not args.add and not args.check:
            raise ValueError("nothing to do: give --add A B or --check")
        if args.canvas_seed is not None and not args.add:
            raise ValueError("--canvas-seed applies to --add")
        ledger = json.loads(LEDGER.read_text())["comparisons"] if LEDGER.exists() else []
        changed = check(ledger, args.data_dir) if args.check else 0
        for a, b in args.add:
            a, b = in_clone(Path(a)), in_clone(Path(b))
            entry = measure(a, b, args.canvas_seed, args.data_dir)
            print(f"{entry['command']}: {entry['only_a']} canvases to {entry['only_b']}, p = {entry['p']:.2g}")
            ledger = [e for e in ledger if not same_pair(e, a, b, args.canvas_seed)] + [entry]
        if args.add:
            write_text(LEDGER, json.dumps({"comparisons": ledger}, indent=1) + "\n")
    except (ValueError, DataError, CheckpointError, OSError) as exc:
        return fail(exc)
    return 1 if changed else 0


def check(ledger: list[dict], data_dir: str | None) -> int:
    """Score each stored pair again; prints each one's verdict, returns how many read otherwise."""
    changed = 0
    for entry in ledger:
        missing = [path for path in (entry["a"], entry["b"]) if not (ROOT / path).is_file()]
        if missing:
            print(f"not kept any more ({', '.join(missing)}): {entry['command']}")
            continue
        replaced = [entry[side] for side in ("a", "b") if entry[f"digest_{side}"] != digest(entry[side])]
        if replaced:
            changed += 1
            print(f"REPLACED since it was stored ({', '.join(replaced)}): {entry['command']}")
            continue
        now = measure(entry["a"], entry["b"], entry["canvas_seed"], data_dir)
        same = (now["only_a"], now["only_b"], now["canvas_hash"]) == (entry["only_a"], entry["only_b"], entry["canvas_hash"])
        changed += not same
        print(f"{'same' if same else 'CHANGED'}: {entry['command']}: {now['only_a']} to {now['only_b']} "
              f"(stored {entry['only_a']} to {entry['only_b']})")
    return changed


if __name__ == "__main__":
    sys.exit(main())
