"""A finished run's record: the part of it the report reads, small enough to keep in the repository.

A report run lives in ``--runs``, outside the repository, and its ``last.pt`` and ``best.pt``
weigh 2-25 MB: a change of machine loses it, and with it hours of training. The report reads
little of a finished run: its configuration, test accuracy, whole learning curve, training time,
and which test canvases it read right (the paired tests and the fresh-canvas check). A record is
that: ``best.pt`` without its weights, plus those per-canvas results as bool tensors, (N,) each,
about 20 KB in all. The few runs whose trained weights the report still needs (seed 0 of a model
that learns where to look: the gallery of where they look, REINFORCE's estimator noise at trained
weights) keep them, or name the checkpoint they were adopted from (``report.py --adopt``) with its
sha256.

The report writes a record of every finished run into its ``records/`` folder beside
``compare.md``. It reads a run from there whenever the run's directory is gone, and ``--train``
does not train it again.
"""
from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import torch

from envs.task import BENCHMARK_VERSION
from glimpse.checkpoint import CheckpointError, save_checkpoint

DROPPED = ("format", "model_state", "optimizer_state")  # a best.pt holds no optimiser state; a last.pt does
NEEDED = ("kind", "model_config", "task", "train_config", "test_accuracy", "history", "right")


def record_path(records_dir: Path, run_name: str) -> Path:
    return records_dir / f"{run_name}.pt"


def make_record(payload: dict, right: dict[str, np.ndarray], keep_weights: bool) -> dict:
    """The record of a finished run from its best.pt ``payload`` (with the whole learning curve)
    and ``right``: for each set of canvases (a name such as "test-v1") which ones the run read
    right, (N,) bool. With ``keep_weights`` the model's weights stay."""
    record = {k: v for k, v in payload.items() if k not in DROPPED}
    # a kept file names no machine's paths: folders by their names alone
    config = record["train_config"] = dict(payload["train_config"])
    for key in ("data_dir", "run_dir"):
        if config.get(key) and config[key] != "bundled":
            record["data_source"] = str(record.get("data_source", "")).replace(config[key], Path(config[key]).name)
            config[key] = Path(config[key]).name
    record["run_dir"] = Path(payload.get("run_dir", "")).name
    if keep_weights:
        record["model_state"] = payload["model_state"]
    record["right"] = {name: torch.from_numpy(np.asarray(r, dtype=bool).copy()) for name, r in right.items()}
    return record


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def canvas_set_name(canvas_seed: int | None, what: str = "") -> str:
    """How a record names a set of test canvases it holds results on: the fixed set (``test-v1``)
    or fresh canvases drawn from ``canvas_seed`` (``fresh-seed20261123-v1``); ``what`` goes before the
    version (a run directory's cache: ``test-right-v1``)."""
    return f"{'test' if canvas_seed is None else f'fresh-seed{canvas_seed}'}{what}-v{BENCHMARK_VERSION}"


# the clone the report runs from: a record names its adopted file from here (report.py runs at the root)
CLONE = Path(__file__).resolve().parents[2]


def adopted_source(run: dict) -> Path | None:
    """The file a record was adopted from (``report.py --adopt``): its path as named, from the working
    directory or else from the clone's root (the report run from elsewhere, or installed), or None."""
    if not run.get("adopted_from"):
        return None
    named = Path(run["adopted_from"])
    return next((path for path in (named, CLONE / named) if path.is_file()), None)


def adopted_file_unchanged(run: dict) -> bool:
    """Whether the checkpoint a record was adopted from is still at the path it names, the same file
    (sha256): a shipped file can be replaced by a better run of another recipe or seed, and the
    record then describes the file as it was."""
    source = adopted_source(run)
    return source is not None and file_sha256(source) == run.get("adopted_sha256")


def write_record(path: Path, record: dict) -> None:
    save_checkpoint(path, record)  # atomic: a kill leaves the old record or the new one


def read_record(path: Path) -> dict | None:
    """The record at ``path`` (its ``right`` as numpy bool arrays), or None when there is none.
    CheckpointError naming the file when it is not a record."""
    if not path.is_file():
        return None
    try:
        record = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        raise CheckpointError(f"{path} is not a report record: it is corrupt or not a PyTorch file ({exc})") from exc
    missing = [key for key in NEEDED if not isinstance(record, dict) or key not in record]
    if missing:
        raise CheckpointError(f"{path} is not a report record: it lacks {', '.join(missing)}")
    record["right"] = {name: r.numpy().astype(bool) for name, r in record["right"].items()}
    return record
