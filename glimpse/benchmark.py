"""The benchmark as a protocol anyone can score a model against, registered here or not.

Published numbers on cluttered MNIST rarely compare: each paper builds its own canvases and picks
its own evaluation (one trajectory or ten averaged, the best epoch chosen on the test set or not).
This module fixes those choices and reports them with the number:

- the canvases: benchmark v1's fixed sets (test digits only for the test split, drawn on the CPU
  from a fixed seed, identical on every machine; their hash goes into the result), or freshly
  drawn ones of the same recipe (``canvas_seed``), the independent check;
- the error with its 95 % (Wilson) interval, on every canvas of the set (or its first ``limit``);
- what the model read per image: the whole canvas, or its glimpses (count and canvas pixels under
  them, context views included), and the trajectories averaged (always 1 here).

Two entry points: :func:`score` for a model that reads whole canvases, ``predict(canvases) ->
logits``; :func:`score_agent` for an agent that acts through the vector env and sees only its
observations. Both return a :class:`BenchmarkResult` that saves as JSON. ``evaluate.py --model
module:callable --preset TASK`` is the command line of :func:`score`.
"""
from __future__ import annotations

import base64
import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch

from envs import ClutteredMNISTVectorEnv
from envs.data import load_mnist
from envs.engine import canvas_digest, first_locations, fixed_canvas_set, indexed_device
from envs.retina import retina_pixels_read
from envs.task import BENCHMARK_VERSION, TASKS, TASKS_AS_SHIPPED, GlimpseTask
from glimpse.cli import write_text
from glimpse.inference import read_right
from glimpse.models.registry import canvases_to_tensor
from glimpse.stats import mcnemar, wilson_interval

__all__ = ["Agent", "BenchmarkResult", "benchmark_task", "fixed_set", "score", "score_agent", "summarise"]

N_CLASSES = 10
TEST_SEED, VAL_SEED = 2, 1  # the fixed canvases train.py validates and tests on
FRESH_SEED = 20261123  # fresh test canvases for the docs' second number: a seed no model was tuned on
CANVAS_KEYS = ("canvas_size", "n_clutter", "centred_digit", "n_digits")  # the task keys that decide the canvases
# The fixed test canvases of this benchmark version on MNIST's test digits, by task: a saved result's
# set_hash must be its task's (tests/test_benchmark_sets.py draws them again)
TEST_SET_HASHES = {"mnist28": "d64c7cbe8d62d4a3", "translated60": "e14015dc6e0af229",
                   "cluttered60": "bf1e9b2cd96d4b19", "cluttered100": "803e18544235f13a",
                   "multi100": "93767cd516d4afd2"}


def canvas_recipe(task: dict) -> tuple:
    """What decides a task's test canvases: two checkpoints with the same recipe are scored on the
    same canvases, so they can be compared canvas by canvas."""
    return tuple(task.get(key, 1 if key == "n_digits" else None) for key in CANVAS_KEYS)


def fixed_set(task: dict, digits, split: str, seed: int | None = None):
    """The split's fixed canvases (benchmark version envs.BENCHMARK_VERSION), or with ``seed``
    fresh canvases by the same recipe; returns them and the seed."""
    seed = (TEST_SEED if split == "test" else VAL_SEED) if seed is None else seed
    return fixed_canvas_set(digits.images, digits.labels, task["canvas_size"], task["n_clutter"],
                            task["centred_digit"], seed, task.get("n_digits", 1)), seed




@dataclass
class BenchmarkResult:
    """One model on one set of canvases, with the protocol that makes the number comparable."""

    benchmark: int  # the canvases' version (envs.task.BENCHMARK_VERSION)
    task: str  # the preset (envs.task.TASKS), or "custom"
    split: str
    canvas_seed: int  # the fixed set's seed, or the fresh canvases'
    set_hash: str  # sha256 of the canvases, labels and digit positions (first 16 hex digits)
    n: int
    error: float
    error_interval: tuple[float, float]  # 95 %, Wilson
    reads: str  # "whole canvas" or "glimpses"
    trajectories_per_image: int
    glimpses_per_image: int | None
    # canvas pixels that enter the model per image: a glimpse counts its widest box whole, and a pixel
    # under two glimpses counts twice (context views included), so this can exceed the canvas
    pixels_read_per_image: int
    model: str = ""
    task_settings: dict = field(default_factory=dict)  # every setting of the task: a "custom" one rebuilds
    mnist_subset: bool = False  # scored on the bundled subset's digits, not MNIST's test set
    right: np.ndarray | None = field(default=None, repr=False)  # (n,) bool, for paired tests (saved packed)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("right")
        out["error_interval"] = list(self.error_interval)
        return out

    def saved(self) -> dict:
        """The result as saved (and as ``evaluate.py --model ... --json`` prints it): its fields, with
        which canvases it read right (bits, base64), so that a paired test can be run on it later
        (:func:`paired`)."""
        saved = self.to_dict()
        if self.right is not None:
            saved["right_bits"] = base64.b64encode(np.packbits(np.asarray(self.right, bool)).tobytes()).decode()
        return saved

    def save(self, path: str | Path) -> None:
        write_text(Path(path), json.dumps(self.saved(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "BenchmarkResult":
        """A saved result (a file :meth:`save` wrote, or the line ``evaluate.py --json`` printed, whose
        extra keys such as ``against`` are left out)."""
        saved = json.loads(Path(path).read_text())
        bits = saved.pop("right_bits", None)
        right = None if bits is None else \
            np.unpackbits(np.frombuffer(base64.b64decode(bits), np.uint8), count=saved["n"]).astype(bool)
        known = {f.name for f in fields(cls)} - {"right", "error_interval"}
        return cls(**{k: v for k, v in saved.items() if k in known},
                   error_interval=tuple(saved["error_interval"]), right=right)


def paired(a: BenchmarkResult, b: BenchmarkResult) -> dict:
    """McNemar's exact test of two results on the same canvases (``only_a`` read right by a alone,
    ``only_b`` by b alone, ``p``); ValueError when they read other canvases or lack their per-canvas record."""
    if a.set_hash != b.set_hash or a.n != b.n:
        raise ValueError(f"the two results read other canvases (hash {a.set_hash} n={a.n}, {b.set_hash} n={b.n}): "
                         f"a paired test needs the same ones")
    if a.right is None or b.right is None:
        raise ValueError("a result saved without which canvases it read right cannot be paired (saved before "
                         "right_bits was recorded?)")
    return mcnemar(a.right, b.right)


class Agent(Protocol):
    """What :func:`score_agent` drives: ``reset(n)`` before a batch of ``n`` episodes (optional), then
    ``act(observation) -> action`` each step, with the env's observation dict (``glimpse``,
    ``location`` and ``context`` tensors on the env's device) and the env's action dict
    (``location`` (n, 2) in [-1, 1], ``label`` (n,) or (n, K): judged at the last step only)."""

    def act(self, observation: dict) -> dict: ...


def benchmark_task(task: str | dict) -> tuple[str, dict]:
    """(name, task dict) of a preset name or a task dict (checked by the env's own rules)."""
    if isinstance(task, str):
        if task not in TASKS_AS_SHIPPED:
            raise ValueError(f"unknown task {task!r}; the presets are {sorted(TASKS_AS_SHIPPED)}")
        if TASKS.get(task) != TASKS_AS_SHIPPED[task]:
            raise ValueError(f"envs.TASKS[{task!r}] was changed in this process ({TASKS.get(task)}, shipped as "
                             f"{TASKS_AS_SHIPPED[task]}): a preset's name scores its shipped canvases only; pass "
                             f"the changed settings as a dict to score them as a custom task")
        return task, _every_setting(TASKS_AS_SHIPPED[task])
    full = _every_setting(task)  # a preset's own settings, defaults written out or not, keep its name
    return next((n for n, t in TASKS_AS_SHIPPED.items() if _every_setting(t) == full), "custom"), full


def _every_setting(task: dict) -> dict:
    """``task`` with the env's defaults filled in (checked by its rules), less the split and data."""
    full = GlimpseTask(**{k: v for k, v in task.items() if k not in ("split", "data_dir")}).to_dict()
    return {k: v for k, v in full.items() if k not in ("split", "data_dir")}


def _canvases(task: dict, split: str, canvas_seed: int | None, data_dir, limit: int | None):
    """The canvases, their seed and whether the digits are the bundled subset's."""
    data = load_mnist(data_dir)
    canvases, seed = fixed_set(task, data.split(split), split, canvas_seed)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        canvases = type(canvases)(canvases.images[:limit], canvases.labels[:limit], canvases.digit_xy[:limit])
    return canvases, seed, data.is_subset


def summarise(right: np.ndarray, canvases=None) -> dict:
    """The numbers every score is made of, the lab's checkpoints' (glimpse.evaluation) and any
    model's: the error over the (N,) canvases read right, its 95 % (Wilson) interval, n, and the
    canvases' hash (None for canvases that came from a file)."""
    right = np.asarray(right, bool)
    errors = int((~right).sum())
    return {"error": errors / len(right), "error_interval": wilson_interval(errors, len(right)), "n": len(right),
            "set_hash": None if canvases is None else canvas_digest(canvases)}


def _result(name: str, task: dict, split: str, seed: int, canvases, right: np.ndarray, **protocol) -> BenchmarkResult:
    numbers = summarise(right, canvases)
    return BenchmarkResult(BENCHMARK_VERSION, name, split, seed, numbers["set_hash"], numbers["n"], numbers["error"],
                           numbers["error_interval"], right=right, task_settings=dict(task), **protocol)


@contextmanager
def _evaluating(model):
    """``model`` in eval mode while it is scored, if it is an ``nn.Module`` (its batch norm uses its
    running statistics, which scoring leaves alone); its mode restored after. A plain function
    that wraps a module must call ``eval()`` itself."""
    training = isinstance(model, torch.nn.Module) and model.training
    if training:
        model.eval()
    try:
        yield
    finally:
        if training:
            model.train()


def check_logits(logits, n: int, n_digits: int, device: torch.device) -> torch.Tensor:
    """The model's output for a batch of ``n`` canvases, or a ValueError that says what was expected:
    a floating tensor on ``device``, (n, 10) or (n, K, 10) for K digits per canvas, every value finite."""
    expected = (n, N_CLASSES) if n_digits == 1 else (n, n_digits, N_CLASSES)
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"the model must return a tensor of logits {expected}, got {type(logits).__name__}")
    if tuple(logits.shape) != expected or not logits.is_floating_point():
        raise ValueError(f"the model must return floating logits of shape {expected}, got {logits.dtype} "
                         f"{tuple(logits.shape)}")
    if logits.device != device:
        raise ValueError(f"the model must return its logits on {device} (where the canvases are), got {logits.device}")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("the model returned NaN or infinite logits")
    return logits


def _call(model, inputs, what: str):
    """``model(inputs)``; whatever it raises becomes a ValueError that says the model raised it
    (the command line's bad input, exit 2), with the original chained; running out of device
    memory is the machine's limit, not bad input, and goes on as it is (a smaller batch helps)."""
    try:
        return model(inputs)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the user's code is reported as theirs
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(f"{what} raised {type(exc).__name__}: {first_line}") from exc


def _check_batch_independent(predict, images: torch.Tensor, logits: torch.Tensor, n_digits: int, device) -> None:
    """ValueError unless ``predict`` gives (to rounding) the same log-probabilities for the batch's
    canvases read in two halves: a score must not depend on --batch-size."""
    half = len(images) // 2
    if half == 0:
        return
    parts = [check_logits(_call(predict, part, f"the model, given canvases {tuple(part.shape)},"), len(part), n_digits,
                          device) for part in (images[:half], images[half:])]
    again = torch.cat(parts).log_softmax(-1)
    if not torch.allclose(logits.log_softmax(-1), again, atol=1e-3, rtol=1e-3):
        moved = float((logits.log_softmax(-1) - again).abs().max())
        raise ValueError(f"the model's answers depend on the batch they come in (log-probabilities moved by up to "
                         f"{moved:.3g} when its first batch was read in two halves): a batch norm in training mode? "
                         f"Call eval() on the module inside the function")


@torch.no_grad()
def score(predict: Callable[[torch.Tensor], torch.Tensor], task: str | dict, *, split: str = "test",
          canvas_seed: int | None = None, device: str | torch.device = "cpu", batch_size: int = 500,
          data_dir: str | None = None, limit: int | None = None, model: str = "") -> BenchmarkResult:
    """The error of ``predict`` on the task's fixed canvases (or fresh ones from ``canvas_seed``).

    ``predict`` maps a batch of canvases (B, 1, H, W) float in [0, 1] on ``device`` to logits (B, 10),
    or (B, K, 10) for K digits per canvas (a canvas counts as right when every digit is). It reads
    the whole canvas, and the result says so. A wrong shape, dtype or device, or a NaN, is a
    ValueError naming what was expected; nothing is written. An ``nn.Module`` is scored in eval mode;
    a model whose answers depend on the batch they come in (a wrapped batch norm left in training
    mode, say) is a ValueError, checked on the first batch read again in two halves."""
    name, task = benchmark_task(task)
    device = indexed_device(device)  # "cuda" is "cuda:0", where the canvases and logits are
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    canvases, seed, subset = _canvases(task, split, canvas_seed, data_dir, limit)
    n_digits = task.get("n_digits", 1)
    right = []
    with _evaluating(predict):
        for start in range(0, len(canvases), batch_size):
            images = canvases_to_tensor(canvases.images[start:start + batch_size], device)
            logits = check_logits(_call(predict, images, f"the model, given canvases {tuple(images.shape)},"),
                                  len(images), n_digits, device)
            if start == 0:
                _check_batch_independent(predict, images, logits, n_digits, device)
            right.append(read_right(logits.argmax(-1).cpu().numpy(), canvases.labels[start:start + batch_size]))
    size = int(task["canvas_size"])
    return _result(name, task, split, seed, canvases, np.concatenate(right), reads="whole canvas",
                   trajectories_per_image=1, glimpses_per_image=None, pixels_read_per_image=size * size, model=model,
                   mnist_subset=subset)


@torch.no_grad()
def score_agent(agent: Agent, task: str | dict, *, split: str = "test", canvas_seed: int | None = None,
                device: str | torch.device = "cpu", batch_size: int = 500, data_dir: str | None = None,
                limit: int | None = None, model: str = "") -> BenchmarkResult:
    """The error of an agent that reads the task's canvases through the vector env, one trajectory
    per canvas. The benchmark drives the env itself and hands it the fixed canvases through its
    reset options (so a paired test sees the same canvases); the agent gets observations only,
    never the env (whose ``render`` and engine hold whole canvases). Glimpses and pixels per image
    follow from the task (its episode length, and the canvas under each glimpse's widest box). An
    agent that is an ``nn.Module`` is scored in eval mode."""
    name, task = benchmark_task(task)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    canvases, seed, subset = _canvases(task, split, canvas_seed, data_dir, limit)
    env_task = {**task, "split": split, "data_dir": data_dir}
    episode = GlimpseTask(**task)
    with _evaluating(agent):
        right = _play(agent, canvases, env_task, episode.first_location, seed, batch_size, device)
    pixels = retina_pixels_read(task, task.get("context_size", 0))["canvas_pixels_touched"]
    return _result(name, task, split, seed, canvases, right, reads="glimpses", trajectories_per_image=1,
                   glimpses_per_image=episode.episode_length, pixels_read_per_image=pixels, model=model,
                   mnist_subset=subset)


def _play(agent: Agent, canvases, env_task: dict, first_location: str, seed: int, batch_size: int,
          device) -> np.ndarray:
    """(N,) bool: the agent's episodes on the canvases, ``batch_size`` at a time, read right."""
    right, envs = [], {}
    # every canvas's first glimpse is drawn once, from the set's seed, so that a task whose first
    # glimpse falls at random scores the same at any batch size
    first = first_locations(torch.Generator().manual_seed(seed), len(canvases), first_location)
    for start in range(0, len(canvases), batch_size):
        images = torch.from_numpy(canvases.images[start:start + batch_size])
        labels = torch.from_numpy(canvases.labels[start:start + batch_size])
        n = len(images)
        if n not in envs:  # one env per batch size (the last batch may be smaller)
            envs[n] = ClutteredMNISTVectorEnv(n, device=device, **env_task)
        env = envs[n]
        observation, _ = env.reset(seed=seed + start, options={"images": images.to(env.device),
                                                              "labels": labels.to(env.device),
                                                              "first_location": first[start:start + n].to(env.device)})
        if hasattr(agent, "reset"):
            _call(agent.reset, n, "the agent's reset()")
        for _ in range(env.task.episode_length):
            observation, reward, terminated, _, _ = env.step(_call(agent.act, observation, "the agent's act()"))
        if not bool(torch.as_tensor(terminated).all()):
            raise RuntimeError("the env must end every episode after its episode_length steps")
        right.append(torch.as_tensor(reward).cpu().numpy() > 0.5)  # 1 only when every digit is right
    return np.concatenate(right)
