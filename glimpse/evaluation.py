"""Scoring a checkpoint: the one code path behind evaluate.py and the README's results table."""
from __future__ import annotations

import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch

from envs.data import load_mnist
from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import CANVAS_KEYS, canvas_recipe, fixed_set, summarise
from glimpse.inference import predict_probabilities, read_right
from glimpse.checkpoint import describe_provenance, load_checkpoint, load_model
from glimpse.models import get_family
from glimpse.progress import progress as progress_bar
from glimpse.stats import mcnemar

def load_images(path: str | Path, canvas_size: int, n_digits: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``images`` (N, H, W) uint8 and ``labels`` (N,) (or (N, K) for a model that reads K digits
    per canvas, in reading order) from an .npz, checked against the model's canvas."""
    try:
        archive = np.load(path, allow_pickle=False)
        arrays = {name: archive[name] for name in archive.files} if hasattr(archive, "files") else None
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as exc:  # missing, truncated, not a zip
        raise ValueError(f"cannot read {path} as .npz ({type(exc).__name__}: {exc})") from exc
    if arrays is None or "images" not in arrays or "labels" not in arrays:
        found = sorted(arrays) if arrays is not None else "a bare array"
        raise ValueError(f"{path} must hold arrays 'images' and 'labels', it has {found}")
    images, labels = arrays["images"], arrays["labels"]
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{path}: 'images' must be (N, H, W) uint8, got {images.dtype} {images.shape}")
    if images.shape[1:] != (canvas_size, canvas_size):
        raise ValueError(f"{path}: canvases are {images.shape[1]}x{images.shape[2]} but the checkpoint was trained "
                         f"on {canvas_size}x{canvas_size}")
    expected = (len(images),) if n_digits == 1 else (len(images), n_digits)
    if labels.shape != expected or not np.issubdtype(labels.dtype, np.integer):
        per_canvas = "" if n_digits == 1 else f" (the checkpoint reads {n_digits} digits per canvas)"
        raise ValueError(f"{path}: 'labels' must be {expected} integers{per_canvas}, got {labels.dtype} {labels.shape}")
    if len(images) == 0:
        raise ValueError(f"{path} holds no images")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: labels must be in 0..9")
    return images, labels.astype(np.int64)


def evaluate_checkpoint(checkpoint: str | Path, *, images_file: str | Path | None = None, split: str = "test",
                        data_dir: str | None = None, samples: int = 0, seed: int = 0, batch_size: int = 500,
                        canvas_seed: int | None = None, limit: int | None = None, progress: bool = True,
                        per_canvas: bool = False, device: torch.device | str = "cpu") -> dict:
    """Accuracy of a checkpoint; raises ValueError / DataError / CheckpointError on bad input.

    Without ``images_file`` it scores the ``split``'s fixed canvases, or with ``canvas_seed``
    canvases drawn from that seed instead; ``limit``: only the first that many. ``per_canvas``
    adds ``right``, a (N,) bool array of which canvases it read right (for paired tests).
    ``seed_dependent`` says whether the result depends on ``seed`` (the family draws some of where
    it looks at random, even without ``samples``: a random first glimpse). The
    model runs on ``device``; the canvases and every random draw are made on the CPU, so only
    floating-point rounding differs between devices."""
    if samples < 0 or batch_size < 1:
        raise ValueError("--samples must be >= 0 and --batch-size >= 1")
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    if canvas_seed is not None and not 0 <= canvas_seed < 2**63:  # what torch's generators take
        raise ValueError(f"--canvas-seed must be >= 0 and below 2**63, got {canvas_seed}")
    if canvas_seed is not None and (canvas_seed < 0 or images_file is not None):
        raise ValueError("--canvas-seed must be >= 0 and applies without --images only")
    model, payload = load_model(checkpoint)
    model.to(device)
    task, arch = payload["task"], payload["kind"]
    family = get_family(arch)
    _check_samples(checkpoint, arch, samples)
    canvases = None
    if images_file is not None:
        images, labels = load_images(images_file, task["canvas_size"], task.get("n_digits", 1))
        described = str(images_file)
    else:
        data = load_mnist(data_dir)
        canvases, set_seed = fixed_set(task, data.split(split), split, canvas_seed)
        images, labels = canvases.images, canvases.labels
        kind_of_set = "set" if canvas_seed is None else "digits on fresh canvases"
        described = (f"{split} {kind_of_set}: {len(labels) if limit is None else min(limit, len(labels))} "
                     f"canvases of {data.source}, seed {set_seed} (benchmark v{BENCHMARK_VERSION})")
        if limit is not None:
            canvases = canvases[:limit]
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    start = time.perf_counter()
    with progress_bar(total=len(images), desc="evaluate", unit="img", disable=not progress) as bar:
        probs = predict_probabilities(arch, model, task, images, batch_size, samples, seed, progress=bar)
    seconds = time.perf_counter() - start
    predictions = probs.argmax(-1).numpy()
    right = read_right(predictions, labels)
    numbers = summarise(right, canvases)  # the benchmark's own arithmetic: one scorer for the lab and any model
    accuracy = 1 - numbers["error"]
    policy = family.evaluation_text(model, task, samples, seed)
    result = {"accuracy": accuracy, "error": numbers["error"], "n": numbers["n"], "kind": arch,
              "error_interval": list(numbers["error_interval"]),  # 95 %, Wilson
              "checkpoint": str(checkpoint), "images": described, "evaluation": policy,
              "images_per_second": len(labels) / seconds, "device": str(device),
              "benchmark": None if images_file is not None else BENCHMARK_VERSION,  # a file's canvases are its own
              "canvas_hash": numbers["set_hash"], "trajectories_per_image": max(samples, 1),
              "seed_dependent": family.evaluation_draws(model, task, 1, seed, samples > 0) is not None,
              "train_seconds": payload.get("train_seconds"),
              "provenance": describe_provenance(payload),
              "train_config": payload.get("train_config", {}),
              "earlier_stages": payload.get("earlier_stages", []),  # the runs it started from (--init-from)
              "budget_changes": payload.get("budget_changes", [])}  # resumes that changed its --epochs
    if labels.ndim == 2:  # several digits per canvas: accuracy counts canvases with every digit right
        result["digit_accuracy"] = float((predictions == labels).mean())
        result["n_digits"] = int(labels.shape[1])
    if per_canvas:
        result["right"] = np.asarray(right, bool)
    return result


def _check_samples(checkpoint, arch: str, samples: int) -> None:
    if samples and not get_family(arch).samples_trajectories:
        raise ValueError(f"--samples applies to models that sample where they look (hard attention); "
                         f"{checkpoint} holds a {arch} model, which is deterministic")


def compare_checkpoints(checkpoint_a: str | Path, checkpoint_b: str | Path, **options) -> dict:
    """Both checkpoints scored by :func:`evaluate_checkpoint` with the same ``options`` (so on the
    same canvases), and McNemar's exact test of the two: ``{"a": result, "b": result, "only_a",
    "only_b", "p"}``. Raises ValueError, before either is scored, when their tasks draw different
    canvases (both read the same ``images_file`` whatever their tasks) or ``samples`` does not apply
    to one of them."""
    payloads = [load_checkpoint(path) for path in (checkpoint_a, checkpoint_b)]
    for path, payload in zip((checkpoint_a, checkpoint_b), payloads):
        _check_samples(path, payload["kind"], options.get("samples", 0))
    recipes = [canvas_recipe(payload["task"]) for payload in payloads]
    if recipes[0] != recipes[1] and options.get("images_file") is None:
        described = [", ".join(f"{key}={value}" for key, value in zip(CANVAS_KEYS, recipe)) for recipe in recipes]
        raise ValueError(f"{checkpoint_b} reads other canvases than {checkpoint_a} ({described[1]} against "
                         f"{described[0]}): a paired test needs the same canvases")
    options = {**options, "per_canvas": True}
    a, b = evaluate_checkpoint(checkpoint_a, **options), evaluate_checkpoint(checkpoint_b, **options)
    return {"a": a, "b": b, **mcnemar(a["right"], b["right"])}
