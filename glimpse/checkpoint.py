"""Checkpoints: written atomically, loadable with ``torch.load(weights_only=True)``.

A checkpoint is a dict of plain Python values and tensors:
``format``, ``kind`` and ``model_config`` (enough to rebuild the model), ``task`` (the canvas
and sensor it was trained for), ``train_config``, ``model_state``, optionally
``optimizer_state``, ``step``, ``best_val_accuracy``, ``best_step``, ``data_source``,
``train_seconds``, ``history`` (one dict per validation: ``step``, ``epoch``,
``val_accuracy``, ``train_seconds`` so far), the run's learning curve, ``provenance``
(:func:`provenance`: the commit, torch version, device and data it was trained with), and for a
run started from another checkpoint (``--init-from``) ``earlier_stages``: the ``train_config`` and
``train_seconds`` of each run before it, oldest first; and for a run resumed with another ``--epochs``
``budget_changes``: each such resume's ``step`` and the ``epochs`` it had until then, oldest first
(its ``train_config`` holds the last ``--epochs``).
"""
from __future__ import annotations

import errno
import io
import os
import pickle
import subprocess
from pathlib import Path

import torch

from envs.task import GlimpseTask
from glimpse.cli import write_atomically
from glimpse.models import build_model

FORMAT = 1
REQUIRED_KEYS = ("format", "kind", "model_config", "task", "model_state")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or not one of ours."""


def code_version() -> str:
    """The git commit of this code ('+changes' when the working tree differs from it), or 'unknown'."""
    root = Path(__file__).resolve().parents[1]
    try:
        def git(*args):
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout

        commit = git("rev-parse", "HEAD").strip()
        changed = bool(git("status", "--porcelain", "--untracked-files=no").strip())
        return commit + ("+changes" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"


def provenance(device, data_digest: str) -> dict:
    """Where a model came from: the commit, torch version and device it was trained with, and a
    hash of its digits (envs.data.MNISTSplits.digest)."""
    return {"commit": code_version(), "torch": str(torch.__version__), "device": str(device),
            "data_sha256": data_digest}


def describe_provenance(payload: dict) -> str:
    """One line for evaluate.py."""
    origin = payload.get("provenance")
    if not origin:
        return "provenance: not recorded (trained before checkpoints recorded it)"
    known = {key: origin.get(key) or "not recorded" for key in ("commit", "torch", "device", "data_sha256")}
    return (f"trained at commit {known['commit']} with torch {known['torch']} on {known['device']}; "
            f"data sha256 {known['data_sha256'][:16]}...")


def training_stages(payload: dict) -> list[dict]:
    """Every run that made checkpoint ``payload`` (or an ``evaluate_checkpoint`` result), oldest
    first, each as ``train_config`` and ``train_seconds`` (and ``budget_changes`` where a resume
    changed its ``--epochs``): the ``earlier_stages`` it was started from (``--init-from``), then its
    own run. A run started from it stores this list as its own ``earlier_stages``, so a model trained
    in stages carries every command that rebuilds it, even after a file it started from is replaced."""
    own = {"train_config": payload["train_config"], "train_seconds": payload.get("train_seconds")}
    if payload.get("budget_changes"):
        own["budget_changes"] = payload["budget_changes"]
    return [*payload.get("earlier_stages", []), own]


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Write ``path`` atomically (:func:`glimpse.cli.write_atomically`: a kill at any moment leaves
    either the old or the new checkpoint, never a torn one). The checkpoint is
    serialised in memory first and then written as bytes, so that a failing disk (ENOSPC) arrives
    as the OSError it is: torch.save writing to a file turns it into a RuntimeError."""
    serialised = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, serialised)

    def write(handle):
        data, written = serialised.getbuffer(), 0
        while written < len(data):  # a short write is not an error by itself: go on until it is
            count = handle.write(data[written:])
            if not count:
                raise OSError(errno.ENOSPC, "the disk takes no more bytes")
            written += count
    write_atomically(Path(path), write)


def load_checkpoint(path: str | os.PathLike) -> dict:
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder: give a checkpoint file in it (best.pt, last.pt)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch's own advice here is to retry with weights_only=False, which runs whatever code
        # the file holds: a Glimpse checkpoint never needs it, so the message does not pass it on
        raise CheckpointError(f"checkpoint {path} is not a Glimpse checkpoint: it is corrupt, not a PyTorch "
                              f"file, or holds Python objects besides tensors and plain values, which are "
                              f"never unpickled here (torch.load(weights_only=True))") from exc
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"checkpoint {path} is corrupt or not a PyTorch file ({type(exc).__name__}: "
                              f"{first_line})") from exc
    if not isinstance(payload, dict) or any(k not in payload for k in REQUIRED_KEYS):
        raise CheckpointError(f"{path} is not a Glimpse checkpoint (expected keys {REQUIRED_KEYS})")
    if payload["format"] != FORMAT:
        raise CheckpointError(f"{path} has checkpoint format {payload['format']}, this version reads {FORMAT}")
    _check_parts(path, payload)
    return payload


# the task fields every checkpoint records (train.py's config writes them; loading checks them)
TASK_FIELDS = ("canvas_size", "n_clutter", "centred_digit", "glimpse_size", "n_scales", "n_glimpses", "first_location")
RESUME_KEYS = {"step": int, "train_config": dict, "optimizer_state": dict, "best_step": int, "best_val_accuracy": float}


def _check_parts(path: Path, payload: dict) -> None:
    """The parts every checkpoint has are of the right kind: the model's config and weights are
    dicts (of tensors), and its task is a task (the env's own checks, with the file named)."""
    for key in ("model_config", "model_state", "task"):
        if not isinstance(payload[key], dict):
            raise CheckpointError(f"{path}: '{key}' must be a dict, got {type(payload[key]).__name__}")
    if not all(isinstance(value, torch.Tensor) for value in payload["model_state"].values()):
        raise CheckpointError(f"{path}: 'model_state' must map names to tensors")
    missing = [name for name in TASK_FIELDS if name not in payload["task"]]
    if missing:
        raise CheckpointError(f"{path}: its task lacks {', '.join(missing)}")
    try:
        GlimpseTask(**payload["task"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: its task does not make canvases ({exc})") from exc


def check_resumable(path: str | os.PathLike, payload: dict) -> None:
    """A run's last.pt holds what an exact resume needs (the step, the run's options, the optimiser's
    state, the best validation so far), each of its kind; CheckpointError naming the file otherwise."""
    if "optimizer_state" not in payload:
        raise CheckpointError(f"{path} is a final model checkpoint, not a run's last.pt: nothing to resume")
    wrong = [f"'{key}' ({'missing' if key not in payload else type(payload[key]).__name__}, not {kind.__name__})"
             for key, kind in RESUME_KEYS.items()
             if not isinstance(payload.get(key), (kind, int) if kind is float else kind)
             or isinstance(payload.get(key), bool)]
    if wrong:
        raise CheckpointError(f"{path} cannot be resumed: {', '.join(wrong)}")


def load_model(path: str | os.PathLike):
    """(model in eval mode, checkpoint dict) from a checkpoint file."""
    payload = load_checkpoint(path)
    try:
        model = build_model(payload["kind"], payload["model_config"])
        model.load_state_dict(payload["model_state"])
    except (ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: weights do not fit a {payload['kind']} model ({exc})") from exc
    broken = [name for name, value in payload["model_state"].items()
              if torch.is_floating_point(value) and not torch.isfinite(value).all()]
    if broken:
        raise CheckpointError(f"{path}: weights are not finite (NaN or inf) in {', '.join(broken[:3])}"
                              f"{' and more' if len(broken) > 3 else ''}: a diverged run's model")
    return model.eval(), payload
