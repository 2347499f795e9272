"""MNIST digits for the canvases: where they come from, and the fixed train/val/test split.

Lookup order (the first that works wins, and the choice is recorded in ``MNISTSplits.source``):

1. an explicit ``data_dir`` argument, else the ``GLIMPSE_DATA`` environment variable;
   a directory named there must hold MNIST, otherwise :class:`DataError` (no silent fallback);
   the special value ``bundled`` asks for the bundled subset;
2. ``./data``, if it already holds MNIST (it is never created);
3. the user cache (``$XDG_CACHE_HOME/glimpse``, by default ``~/.cache/glimpse``), downloading
   MNIST there with torchvision if it is not there yet (where there is internet);
4. the bundled subset of real MNIST in ``envs/assets``, with one warning that says why.

Every directory is in torchvision's layout: ``<dir>/MNIST/raw/train-images-idx3-ubyte`` etc.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_ENV_VAR = "GLIMPSE_DATA"
DEFAULT_DATA_DIR = Path("data")
BUNDLED_SUBSET = Path(__file__).resolve().parent / "assets" / "mnist_subset.npz"
RAW_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
FULL_VAL_SIZE = 5000  # held out of the 60k training digits for model selection
SUBSET_VAL_FRACTION = 0.1
SPLIT_SEED = 0  # fixed: every run, whatever its seed, validates on the same digits
SPLITS = ("train", "val", "test")
BUNDLED_NAME = "bundled"  # data_dir value that selects the bundled subset explicitly


class DataError(RuntimeError):
    """MNIST could not be found or read; the message says where it looked and why."""


class BundledSubsetWarning(UserWarning):
    """Full MNIST was not found: the run uses the bundled subset (shown once per process)."""


warnings.simplefilter("once", BundledSubsetWarning)
_format_warning = warnings.formatwarning


def _one_line(message, category, filename, lineno, line=None) -> str:
    """The bundled-subset warning as one line for the user (no source line of the lab's code after it)."""
    if issubclass(category, BundledSubsetWarning):
        return f"warning: {message}\n"
    return _format_warning(message, category, filename, lineno, line)


warnings.formatwarning = _one_line


@dataclass(frozen=True)
class Digits:
    """One split: ``images`` (N, 28, 28) uint8 and ``labels`` (N,) int64, both read-only."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class MNISTSplits:
    train: Digits
    val: Digits
    test: Digits
    source: str  # human-readable: which files these digits came from
    is_subset: bool

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of every split's images and labels, in order: which digits a model saw."""
        h = hashlib.sha256()
        for digits in (self.train, self.val, self.test):
            h.update(digits.images.tobytes())
            h.update(digits.labels.tobytes())
        return h.hexdigest()

    def split(self, name: str) -> Digits:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")
        return getattr(self, name)


def _has_raw_files(root: Path) -> bool:
    raw = root / "MNIST" / "raw"
    return all((raw / name).is_file() for name in RAW_FILES)


def _read_torchvision(root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from torchvision.datasets import MNIST

    try:
        train = MNIST(root=str(root), train=True, download=False)
        test = MNIST(root=str(root), train=False, download=False)
    except Exception as exc:  # torchvision raises bare asserts / RuntimeErrors on bad files
        raise DataError(
            f"MNIST files under {root / 'MNIST' / 'raw'} are missing, corrupt or unreadable "
            f"({type(exc).__name__}: {exc}). Expected torchvision's layout with {', '.join(RAW_FILES)}."
        ) from exc
    arrays = (train.data.numpy(), train.targets.numpy(), test.data.numpy(), test.targets.numpy())
    _check_arrays(*arrays, where=str(root))
    return arrays


def _check_arrays(train_x, train_y, test_x, test_y, where: str) -> None:
    for name, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
        if x.ndim != 3 or x.shape[1:] != (28, 28) or x.dtype != np.uint8:
            raise DataError(f"{where}: {name} images have shape {x.shape} {x.dtype}, expected (N, 28, 28) uint8")
        if y.shape != (len(x),):
            raise DataError(f"{where}: {name} labels have shape {y.shape}, expected ({len(x)},)")
        if len(y) and (y.min() < 0 or y.max() > 9):
            raise DataError(f"{where}: {name} labels outside 0..9")


def cache_dir() -> Path:
    """Where MNIST is downloaded: ``$XDG_CACHE_HOME/glimpse`` (default ``~/.cache/glimpse``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "glimpse"


def _download(root: Path) -> str | None:
    """Download MNIST into ``root``; None when done, else why it failed (one line)."""
    from torchvision.datasets import MNIST

    old_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(20)
    try:
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            for train in (True, False):  # torchvision prints every mirror it tries: the message below says it once
                MNIST(root=str(root), train=train, download=True)
        return None
    except Exception as exc:  # no network, mirror down, disk full: fall through to the subset
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    finally:
        socket.setdefaulttimeout(old_timeout)


def read_bundled_subset(path: Path = BUNDLED_SUBSET):
    """The bundled subset as (train_x, train_y, test_x, test_y); see scripts/make_mnist_subset.py."""
    try:
        with np.load(path) as archive:
            arrays = tuple(archive[k] for k in ("train_images", "train_labels", "test_images", "test_labels"))
    except Exception as exc:
        raise DataError(f"bundled MNIST subset {path} is missing or corrupt ({exc})") from exc
    arrays = (arrays[0], arrays[1].astype(np.int64), arrays[2], arrays[3].astype(np.int64))
    _check_arrays(*arrays, where=str(path))
    return arrays


def _split(train_x, train_y, test_x, test_y, source: str, is_subset: bool) -> MNISTSplits:
    n_val = round(len(train_y) * SUBSET_VAL_FRACTION) if is_subset else FULL_VAL_SIZE
    order = np.random.default_rng(SPLIT_SEED).permutation(len(train_y))
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])

    def digits(x, y):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y, dtype=np.int64)
        x.setflags(write=False)
        y.setflags(write=False)
        return Digits(x, y)

    return MNISTSplits(
        train=digits(train_x[train_idx], train_y[train_idx]),
        val=digits(train_x[val_idx], train_y[val_idx]),
        test=digits(test_x, test_y),
        source=source,
        is_subset=is_subset,
    )


def explicit_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The directory the user asked for (argument, then $GLIMPSE_DATA), or None.

    An empty argument is an error, not "look elsewhere": it is most often an unset shell variable
    (``--data-dir "$MNIST"``), and falling back would train on other digits without a word.
    An empty ``$GLIMPSE_DATA`` counts as unset, as shells treat it.
    """
    if data_dir is not None and str(data_dir).strip() == "":
        raise DataError("--data-dir is empty (an unset shell variable?): name a folder holding MNIST/raw, "
                        f"or '{BUNDLED_NAME}', or leave the option out to use the lookup order")
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR) or None
    return Path(chosen).expanduser() if chosen is not None else None


def load_mnist(data_dir: str | os.PathLike | None = None, download: bool = True) -> MNISTSplits:
    """Find MNIST in the documented order and split it. Cached per (directory, download)."""
    explicit = explicit_data_dir(data_dir)
    if explicit is not None and str(explicit) == BUNDLED_NAME:
        return load_bundled_subset()
    key = str(explicit.resolve()) if explicit is not None else None
    return _load_cached(key, download, str(Path.cwd()))


@functools.lru_cache(maxsize=4)
def _load_cached(explicit: str | None, download: bool, cwd: str) -> MNISTSplits:
    if explicit is not None:
        root = Path(explicit)
        if not _has_raw_files(root):
            raise DataError(
                f"no MNIST in {root} (from --data-dir or ${DATA_ENV_VAR}): expected "
                f"{root / 'MNIST' / 'raw'} holding {', '.join(RAW_FILES)}"
            )
        return _split(*_read_torchvision(root), source=f"full MNIST from {root}", is_subset=False)

    local = Path(cwd) / DEFAULT_DATA_DIR
    if _has_raw_files(local):
        return _split(*_read_torchvision(local), source=f"full MNIST from {local}", is_subset=False)
    cache = cache_dir()
    failure = "downloads are off" if not download else None
    if not _has_raw_files(cache) and download:
        failure = _download(cache)
    if _has_raw_files(cache):
        return _split(*_read_torchvision(cache), source=f"full MNIST from {cache}", is_subset=False)

    arrays = read_bundled_subset()
    warnings.warn(
        f"full MNIST not found (no --data-dir or ${DATA_ENV_VAR}, none in ./data or {cache}; the download into "
        f"{cache} failed: {failure}). Using the bundled subset: {len(arrays[1])} training and {len(arrays[3])} "
        f"test digits, so accuracies are not comparable with the papers. Point --data-dir at a folder "
        f"holding MNIST/raw to use the full set.", BundledSubsetWarning, stacklevel=3)
    return _split(*arrays, source=f"bundled subset {BUNDLED_SUBSET.name} "
                  f"({len(arrays[1])} train / {len(arrays[3])} test digits)", is_subset=True)


@functools.lru_cache(maxsize=1)
def load_bundled_subset() -> MNISTSplits:
    """The bundled subset, split like the full set (tests and offline demos use it directly)."""
    return _split(*read_bundled_subset(), source=f"bundled subset {BUNDLED_SUBSET.name}", is_subset=True)
