"""The episode engine: cluttered-MNIST canvases, glimpses and batched episodes, in torch, on any device.

Canvas recipe (DeepMind's mnist-cluttered): start black; add ``n_clutter`` random 8x8 crops of
other digits of the same split at uniformly random positions; add the digit at a uniformly
random position fully inside the canvas; clip to the pixel range. Adding then clipping once
equals clipping after every piece because all values are non-negative.

Multi-digit canvases (``n_digits`` > 1, as in Ba et al. 2015's two-digit task) place that many
digits at uniformly random positions that do not overlap and label them in reading order: left
to right by the digit's left edge, then top to bottom.

Everything is batched and stays on the device of the :class:`DigitBank` and the generator: one
canvas batch is a fixed number of random draws and one ``scatter_add_``, with no Python loop over
canvases and no host synchronisation (the non-overlap rejection sampling draws a fixed number of
candidate layouts at once instead of looping until every canvas has one). The same generator
seed gives the same canvases on the same device; CPU and CUDA generators draw different numbers,
so the fixed benchmark sets (:func:`fixed_canvas_set`) are always drawn on the CPU.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from envs.retina import extract_glimpses, integral_images
from envs.task import DIGIT_SIZE, CLUTTER_SIZE, GlimpseTask, digits_that_fit

def cuda_available() -> bool:
    """Whether a CUDA GPU can be used here (the engine's one check; tests/test_fake_cuda.py fakes it)."""
    return torch.cuda.is_available()


def indexed_device(device: torch.device | str) -> torch.device:
    """``device`` with its index: "cuda" is the current CUDA device ("cuda:0" where no GPU can be
    asked). The one place a device gets its index, so that a generator made on "cuda" (which
    keeps no index: pytorch issue 58545) and digits moved to "cuda" compare and cache as one device."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        return torch.device("cuda", index)
    return device


# candidate layouts per multi-digit canvas: a canvas whose candidates all overlap (chance
# 0.39**64 for two digits on 100x100) takes a grid layout that cannot fail
PLACEMENT_CANDIDATES = 64


@dataclass(frozen=True)
class DigitBank:
    """One split's digits on a device: ``images`` (M, 28, 28) uint8, ``labels`` (M,) int64."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def device(self) -> torch.device:
        return self.images.device

    @staticmethod
    def of(digits, device: torch.device | str = "cpu") -> "DigitBank":
        """The bank of ``digits`` (an ``envs.data.Digits``, numpy) on ``device``: moved there once
        and shared by every env and learner that asks for the same split on the same device."""
        key = (id(digits.images), str(indexed_device(device)))
        held = _BANKS.get(key)
        if held is None or held[0] is not digits.images:  # (holding the array keeps its id unique)
            while len(_BANKS) >= MAX_BANKS:
                _BANKS.pop(next(iter(_BANKS)))
            held = _BANKS[key] = (digits.images, DigitBank.from_arrays(digits.images, digits.labels, device))
        return held[1]

    @staticmethod
    def from_arrays(images: np.ndarray, labels: np.ndarray, device: torch.device | str = "cpu") -> "DigitBank":
        """A bank of (M, 28, 28) uint8 ``images`` and (M,) ``labels``, copied to ``device``."""
        images, labels = np.asarray(images), np.asarray(labels)
        if images.ndim != 3 or images.shape[1:] != (DIGIT_SIZE, DIGIT_SIZE) or images.dtype != np.uint8:
            raise ValueError(f"digits must be (M, 28, 28) uint8, got {images.dtype} {images.shape}")
        if labels.shape != (len(images),):
            raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
        return DigitBank(torch.tensor(images, device=device), torch.tensor(labels, dtype=torch.int64, device=device))


MAX_BANKS = 8  # splits x devices kept; the oldest goes first
_BANKS: dict[tuple[int, str], tuple[np.ndarray, DigitBank]] = {}


@dataclass(frozen=True)
class CanvasBatch:
    """``images`` (N, H, W) uint8; ``labels`` (N,) int64; ``digit_xy`` (N, 2) top-left (x, y) of the
    digit; with K > 1 digits per canvas ``labels`` (N, K) and ``digit_xy`` (N, K, 2), in reading
    order. Torch tensors on one device (:meth:`numpy` gives a host copy)."""

    images: torch.Tensor
    labels: torch.Tensor
    digit_xy: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index) -> "CanvasBatch":
        return CanvasBatch(self.images[index], self.labels[index], self.digit_xy[index])

    def to(self, device) -> "CanvasBatch":
        return CanvasBatch(self.images.to(device), self.labels.to(device), self.digit_xy.to(device))

    def numpy(self) -> "NumpyCanvases":
        return NumpyCanvases(*(t.cpu().numpy() for t in (self.images, self.labels, self.digit_xy)))


@dataclass(frozen=True)
class NumpyCanvases:
    """A :class:`CanvasBatch` on the host, as numpy arrays (for evaluation, drawings and files)."""

    images: np.ndarray
    labels: np.ndarray
    digit_xy: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index) -> "NumpyCanvases":
        return NumpyCanvases(self.images[index], self.labels[index], self.digit_xy[index])


def _randint(generator: torch.Generator, high: int, size) -> torch.Tensor:
    return torch.randint(0, high, size, generator=generator, device=generator.device)


def make_canvases(generator: torch.Generator, bank: DigitBank, indices: torch.Tensor, canvas_size: int,
                  n_clutter: int, centred: bool = False, n_digits: int = 1) -> CanvasBatch:
    """One canvas per entry of ``indices``, on the bank's device, all randomness from ``generator``
    (which must live on that device).

    Args:
        bank: the split's digits; clutter is cut from these too.
        indices: (N,) int64, which digits to place (with several digits: the first of each; the
            others are drawn from ``generator``, so a fixed set still uses every digit once).
        canvas_size: side S of the square canvas (>= 28).
        n_clutter: 8x8 clutter pieces per canvas (>= 0), each cut from another digit than ``indices``.
        centred: put the digit in the centre instead of at a random position.
        n_digits: digits per canvas, at random places that do not overlap.
    Returns:
        :class:`CanvasBatch` with (N, S, S) uint8 images.
    Draw order (fixed, whatever the data): clutter sources, crop corners, clutter positions, then
    (multi-digit canvases) the other digits, then the digit positions.
    """
    device, m = bank.device, len(bank)
    if indexed_device(generator.device) != indexed_device(device):
        raise ValueError(f"the generator is on {generator.device} but the digits are on {device}")
    if n_clutter > 0 and m < 2:
        raise ValueError("clutter needs at least 2 digits in the split (it is cut from *other* digits)")
    if centred and n_digits > 1:
        raise ValueError("several digits cannot all be centred: use random positions")
    if n_digits > digits_that_fit(canvas_size):
        raise ValueError(f"at most {digits_that_fit(canvas_size)} non-overlapping {DIGIT_SIZE}x{DIGIT_SIZE} digits "
                         f"fit on a {canvas_size}x{canvas_size} canvas, asked for {n_digits}")
    indices = indices.to(device=device, dtype=torch.int64)
    n, size = len(indices), canvas_size
    pixels = bank.images.view(m * DIGIT_SIZE * DIGIT_SIZE)  # every digit's pixels, one after the other
    # integer adds: exact and order-free, so scatter_add_ is deterministic on every device
    canvas = torch.zeros(n, size * size, dtype=torch.int32, device=device)

    if n_clutter:
        source = (indices[:, None] + 1 + _randint(generator, m - 1, (n, n_clutter))) % m  # another digit
        crop = _randint(generator, DIGIT_SIZE - CLUTTER_SIZE + 1, (n, n_clutter, 2))
        where = _randint(generator, size - CLUTTER_SIZE + 1, (n, n_clutter, 2))
        # flat offsets: the crop's first pixel in the bank, then the 8x8 patch (precomputed per size)
        start = (source * DIGIT_SIZE + crop[..., 1]) * DIGIT_SIZE + crop[..., 0]
        patches = pixels.take(start[..., None] + _patch_offsets(CLUTTER_SIZE, DIGIT_SIZE, device))
        target = (where[..., 1] * size + where[..., 0])[..., None] + _patch_offsets(CLUTTER_SIZE, size, device)
        canvas.scatter_add_(1, target.view(n, -1), patches.view(n, -1).to(torch.int32))

    if n_digits > 1:
        others = _randint(generator, m, (n, n_digits - 1))
        placed = torch.cat([indices[:, None], others], 1)
        digit_xy = non_overlapping_positions(generator, n, n_digits, size)
        order = torch.argsort(digit_xy[..., 0] * size + digit_xy[..., 1], dim=1, stable=True)  # reading order
        placed = placed.gather(1, order)
        digit_xy = digit_xy.gather(1, order[..., None].expand(-1, -1, 2))
    else:
        placed = indices[:, None]
        if centred:
            digit_xy = torch.full((n, 1, 2), (size - DIGIT_SIZE) // 2, dtype=torch.int64, device=device)
        else:
            digit_xy = _randint(generator, size - DIGIT_SIZE + 1, (n, 1, 2))
    digits = bank.images.view(m, -1).index_select(0, placed.view(-1))  # whole rows: a copy, not a gather
    target = (digit_xy[..., 1] * size + digit_xy[..., 0])[..., None] + _patch_offsets(DIGIT_SIZE, size, device)
    canvas.scatter_add_(1, target.view(n, -1), digits.view(n, -1).to(torch.int32))
    images = canvas.clamp_(0, 255).to(torch.uint8).view(n, size, size)
    labels = bank.labels[placed]
    if n_digits == 1:
        labels, digit_xy = labels[:, 0], digit_xy[:, 0]
    return CanvasBatch(images, labels, digit_xy)


@functools.lru_cache(maxsize=16)
def _patch_offsets(side: int, row_length: int, device: torch.device) -> torch.Tensor:
    """(side*side,) flat offsets of a side x side patch's pixels in an image with rows of
    ``row_length`` pixels, from the patch's first pixel."""
    r = torch.arange(side, device=device)
    return (r[:, None] * row_length + r[None, :]).view(-1)


def non_overlapping_positions(generator: torch.Generator, n: int, n_digits: int, canvas_size: int) -> torch.Tensor:
    """(n, n_digits, 2) int64 top-left corners of digits that do not overlap, never failing for a
    count that :func:`envs.task.digits_that_fit` allows.

    Uniform over such layouts: each canvas takes the first of PLACEMENT_CANDIDATES independent
    uniform layouts in which no pair overlaps (rejection sampling, drawn at once: no loop, no host
    sync). A canvas whose candidates all overlap (only where the digits nearly fill the canvas,
    e.g. 4 on 56x56) takes a layout that cannot fail: distinct random cells of the grid of
    ``canvas_size // 28`` cells a side, all shifted by one random offset within the grid's slack."""
    device = generator.device
    high = canvas_size - DIGIT_SIZE + 1
    candidates = _randint(generator, high, (n, PLACEMENT_CANDIDATES, n_digits, 2))
    first, second = torch.triu_indices(n_digits, n_digits, 1, device=device)
    gaps = (candidates[:, :, first] - candidates[:, :, second]).abs()  # (n, R, pairs, 2)
    fits = ~(gaps < DIGIT_SIZE).all(-1).any(-1)  # (n, R)
    chosen = fits.to(torch.uint8).argmax(1)  # the first that fits (0 if none)
    xy = candidates[torch.arange(n, device=device), chosen]
    side = canvas_size // DIGIT_SIZE
    cells = torch.argsort(torch.rand(n, side * side, generator=generator, device=device), dim=1)[:, :n_digits]
    offset = _randint(generator, canvas_size - side * DIGIT_SIZE + 1, (n, 1, 2))
    grid = torch.stack([cells % side, cells // side], -1) * DIGIT_SIZE + offset
    return torch.where(fits.any(1)[:, None, None], xy, grid)


def fixed_canvas_set(images: np.ndarray, labels: np.ndarray, canvas_size: int, n_clutter: int, centred: bool,
                     seed: int, n_digits: int = 1) -> NumpyCanvases:
    """Every digit of a split ((M, 28, 28) uint8 ``images``, (M,) ``labels``) placed once (as the
    first of ``n_digits``), in order, with the rest drawn from ``seed`` on the CPU: a fixed
    validation or test set, identical on every machine whatever device trains on it (benchmark
    version :data:`envs.task.BENCHMARK_VERSION`)."""
    bank = DigitBank.from_arrays(images, labels)
    return make_canvases(torch.Generator().manual_seed(seed), bank, torch.arange(len(bank)), canvas_size,
                         n_clutter, centred, n_digits).numpy()


def canvas_digest(canvases: NumpyCanvases | CanvasBatch) -> str:
    """sha256 (first 16 hex digits) of a canvas set's images, labels and digit positions: the same
    on every machine for the same benchmark version (tests/test_benchmark_sets.py holds the table)."""
    digest = hashlib.sha256()
    for part in (canvases.images, canvases.labels, canvases.digit_xy):
        digest.update(np.ascontiguousarray(part.cpu().numpy() if isinstance(part, torch.Tensor) else part).tobytes())
    return digest.hexdigest()[:16]


def first_locations(generator: torch.Generator, n: int, how: str) -> torch.Tensor:
    """(n, 2) float32 first-glimpse locations on the generator's device: the centre, or uniform
    on [-1, 1]^2."""
    if how == "centre":
        return torch.zeros(n, 2, device=generator.device)
    if how == "random":
        return torch.rand(n, 2, generator=generator, device=generator.device) * 2 - 1
    raise ValueError(f"first_location must be 'random', 'centre' or locations of shape (2,) or ({n}, 2), got {how!r}")


def coarse_view(canvases: torch.Tensor, size: int) -> torch.Tensor:
    """(B, H, W) uint8 canvases -> (B, size, size) float32 in [0, 1]: the mean of each cell of a
    size x size grid (cells of unequal sides where ``size`` does not divide H)."""
    return F.adaptive_avg_pool2d(canvases[:, None].to(torch.float32), size)[:, 0] / 255.0


def as_tensor(value, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor on ``device`` from a tensor (no copy when it is already there) or an array."""
    tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(np.asarray(value)))
    return tensor.to(device=device, dtype=dtype or tensor.dtype)


def _user_tensor(name: str, value, device: torch.device) -> torch.Tensor:
    """:func:`as_tensor` of something a user gave; ValueError naming it when it is not an array of numbers
    (None, strings, ragged lists)."""
    try:
        return as_tensor(value, device)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers, got {type(value).__name__} {value!r:.80}") from exc


class EpisodeEngine:
    """B synchronous glimpse episodes of one task on one device: the engine behind both envs.

    It owns the task's digits on the device (loaded lazily, moved once), a generator on the
    device, and the episodes' state after :meth:`start`: ``canvases`` (B, H, W) uint8, ``labels``
    (B,) or (B, K) int64, ``digit_xy`` (B, 2) or (B, K, 2) or None (canvases given by the user),
    ``locations`` (a list of (B, 2) float32, one per glimpse so far) and ``t`` (glimpses taken).
    Every step is batched tensor work on the device. Checks of values given by a user
    (``validate=True``) read them on the host; with ``validate=False`` (a trainer whose inputs
    are valid by construction) only shapes and dtypes are checked, and nothing syncs.
    """

    def __init__(self, task: GlimpseTask, device: torch.device | str = "cpu"):
        if torch.device(device).type == "cuda" and not cuda_available():  # instead of a driver error
            raise ValueError(f"device={str(device)!r}: no CUDA GPU is available here; use device='cpu'")
        self.task, self.device = task, indexed_device(device)
        self.generator = torch.Generator(self.device)
        self._bank: DigitBank | None = None
        self.data_source: str | None = None
        self.canvases = self.labels = self.digit_xy = self.context = None
        self._ii: torch.Tensor | None = None
        self.locations: list[torch.Tensor] = []
        self.t = 0

    @property
    def bank(self) -> DigitBank:
        if self._bank is None:  # loaded lazily so that spaces can be inspected without data
            from envs.data import load_mnist

            mnist = load_mnist(self.task.data_dir)
            self._bank, self.data_source = DigitBank.of(mnist.split(self.task.split), self.device), mnist.source
        return self._bank

    # -- what an episode starts from ------------------------------------------------------------
    def first_locations(self, n: int, how, validate: bool = True) -> torch.Tensor:
        """``how``: "centre", "random" (from the engine's generator) or explicit locations, (2,) for
        all or (n, 2), within [-1, 1]."""
        if how is None:  # Gymnasium's habit: an option given as None is its default
            how = self.task.first_location
        if isinstance(how, str):
            return first_locations(self.generator, n, how)
        try:
            locations = as_tensor(how, self.device, torch.float32)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"first_location must be 'random', 'centre' or locations of shape (2,) or ({n}, 2), "
                             f"got {type(how).__name__} {how!r}") from exc
        if locations.shape == (2,):
            locations = locations.expand(n, 2)
        if locations.shape != (n, 2):
            raise ValueError(f"first_location must be 'random', 'centre' or locations of shape (2,) or ({n}, 2), "
                             f"got shape {tuple(locations.shape)}")
        if validate and not bool(torch.isfinite(locations).all() and (locations.abs() <= 1).all()):
            raise ValueError("first_location values must be finite and lie in [-1, 1]")
        return locations

    def digit_indices(self, indices, n: int, validate: bool = True) -> torch.Tensor:
        """(n,) int64 digits of the split to place: given, or uniform draws from the generator."""
        size = len(self.bank)
        if indices is None:
            return _randint(self.generator, size, (n,))
        tensor = as_tensor(indices, self.device)
        if tensor.shape != (n,) or tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
            raise ValueError(f"indices must be {n} integers in 0..{size - 1}, got {tensor.dtype} {tuple(tensor.shape)}")
        if validate and not bool(((tensor >= 0) & (tensor < size)).all()):
            raise ValueError(f"indices must be {n} integers in 0..{size - 1} (the {self.task.split} split)")
        return tensor.long()

    def sample_canvases(self, indices: torch.Tensor, generator: torch.Generator | None = None) -> CanvasBatch:
        """Canvases of the task by the recipe, from ``generator`` (default: the engine's own)."""
        task = self.task
        return make_canvases(generator or self.generator, self.bank, indices, task.canvas_size, task.n_clutter,
                             task.centred_digit, task.n_digits)

    def user_canvases(self, images, labels, n: int, validate: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Canvases given by the caller: (n, H, W) uint8 and their labels ((n,) or (n, K) in 0..9)."""
        size = self.task.canvas_size
        images = _user_tensor("canvases", images, self.device)
        if tuple(images.shape) != (n, size, size) or images.dtype != torch.uint8:
            raise ValueError(f"canvases must be uint8 of shape {(n, size, size)}, got {images.dtype} "
                             f"{tuple(images.shape)}")
        shape = (n,) if self.task.n_digits == 1 else (n, self.task.n_digits)
        labels = _user_tensor("labels", labels, self.device)
        if tuple(labels.shape) != shape or labels.dtype.is_floating_point or labels.dtype == torch.bool:
            raise ValueError(f"labels must be integers of shape {shape}, got {labels.dtype} {tuple(labels.shape)}")
        if validate and not bool(((labels >= 0) & (labels <= 9)).all()):
            raise ValueError("labels must be in 0..9")
        return images, labels.long()

    # -- the episode ---------------------------------------------------------------------------
    def start(self, canvases: torch.Tensor, labels: torch.Tensor, digit_xy: torch.Tensor | None,
              first: torch.Tensor) -> torch.Tensor:
        """Begin episodes on ``canvases``; returns the first glimpses (B, k, g, g) float32. With the
        task's ``context_size`` s, ``context`` is then (B, s, s) float32: each canvas area-averaged
        down to s x s, in [0, 1]."""
        self.canvases, self.labels, self.digit_xy = canvases, labels, digit_xy
        self._ii = integral_images(canvases)
        self.context = coarse_view(canvases, self.task.context_size) if self.task.context_size else None
        self.locations, self.t = [], 0
        return self.look(first)

    def look(self, locations: torch.Tensor) -> torch.Tensor:
        """Take the next glimpse of every episode at ``locations`` (B, 2) in [-1, 1]."""
        glimpses = extract_glimpses(self._ii, locations, self.task.glimpse_size, self.task.n_scales)
        self.locations.append(locations)
        self.t += 1
        return glimpses

    def rewards(self, labels: torch.Tensor) -> torch.Tensor:
        """(B,) float32: 1 where the canvas was read right (every digit of it), else 0."""
        right = labels == self.labels
        return (right if right.dim() == 1 else right.all(-1)).to(torch.float32)

    @property
    def finished(self) -> bool:
        return self.t >= self.task.episode_length

    def path(self) -> torch.Tensor:
        """(B, t, 2) locations of the glimpses taken so far."""
        return torch.stack(self.locations, 1)
