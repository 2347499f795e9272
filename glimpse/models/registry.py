"""The registry of attention families: everything the rest of the lab needs to know about a model.

A *family* (RAM, DRAM, DRAW, Show-Attend-Tell, the Spatial Transformer, RAM's differentiable retina,
the full-image baselines and controls) is one module under ``glimpse/models/`` that subclasses
:class:`Family` and registers itself with :func:`register`. The training loop, inference,
evaluation, finding the digit, measurements, pictures and the report ask the registry
(:func:`get_family`, :func:`list_families`) and call the family's methods; none of them branches
on which model it holds.

A family says, in one place:

- ``name`` (the ``kind`` stored in checkpoints), ``title`` (how tables call it), ``mode``
  (how it learns: ``"hard"``, REINFORCE through the environment; ``"soft"``, backpropagation
  through its attention; ``"full"``, a full-image network with no attention);
- ``Config`` and ``Model``, and :meth:`Family.model_config`, its config built from the training
  options; ``task_overrides``, where it needs other task defaults than a preset's (visible here,
  not in the presets);
- :meth:`Family.run`: logits and *where it looked* (:class:`Attention`, one common form) for a
  batch of canvases; :meth:`Family.evaluation_draws` for families whose evaluation is random;
- :meth:`Family.training_terms`: loss terms and metrics beyond cross-entropy (soft families);
- :meth:`Family.pixels_read`: its reading cost; :meth:`Family.attention_module`: the parameters
  that decide where it looks (for the gradient-variance measurement).

Pictures are drawn from :class:`Attention` by :func:`glimpse.viz.draw_attention`: one code path
for TensorBoard and the report.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

MODES = ("hard", "soft", "full")


@dataclass(frozen=True)
class Option:
    """A training option a family adds to ``train.py``: its default (whose type is the option's),
    its ``--help`` text, and the values it may take (``choices``, or a range: at least ``low``, or
    above it when ``low_open``, and at most ``high``)."""

    default: Any
    help: str
    choices: tuple | None = None
    low: float | None = None
    low_open: bool = False
    high: float | None = None

    def check(self, flag: str, value) -> None:
        """ValueError naming ``flag`` when ``value`` is outside the option's range."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            raise ValueError(f"{flag} must be {'>' if self.low_open else '>='} {self.low:g}, got {value}")
        if self.high is not None and value > self.high:
            raise ValueError(f"{flag} must be at most {self.high:g}, got {value}")


@dataclass
class Attention:
    """Where a model looked, for a batch of B canvases and T steps, in one form for every family.

    ``centres`` (B, T, 2): unit (x, y) (see envs.coords; [-1, 1] is the canvas, and DRAW's
    unbounded grid centre may lie off it) of what step t looked at;
    ``boxes`` (B, T, S) or None: widths in canvas pixels of the S square boxes read around each
    centre (RAM: its k scales, finest first; DRAW: the filterbank grid; STN: the crop);
    ``maps`` (B, T, gh, gw) or None: soft weights over a grid of cells covering the canvas
    (Show-Attend-Tell); ``map_cells`` (first cell's centre, stride), in canvas pixels along either
    side, where the maps' cells lie (None: gh x gw equal cells tiling the canvas);
    ``glimpses`` (B, T, k, g, g) or None: what a hard model's sensor returned.
    """

    centres: torch.Tensor
    boxes: torch.Tensor | None = None
    maps: torch.Tensor | None = None
    glimpses: torch.Tensor | None = None
    snap_to_retina: bool = False  # its boxes lie on whole pixels, as envs.retina reads them
    map_cells: tuple[float, float] | None = None

    def cpu(self) -> "Attention":
        move = lambda x: None if x is None else x.detach().cpu()  # noqa: E731
        return replace(self, centres=move(self.centres), boxes=move(self.boxes), maps=move(self.maps),
                       glimpses=move(self.glimpses))

    def __getitem__(self, index) -> "Attention":
        pick = lambda x: None if x is None else x[index]  # noqa: E731
        return replace(self, centres=pick(self.centres), boxes=pick(self.boxes), maps=pick(self.maps),
                       glimpses=pick(self.glimpses))


@dataclass
class Look:
    """What :meth:`Family.run` returns: ``logits`` (B, C), or (B, K, C) for K digits per canvas;
    ``attention`` (None for a full-image network); ``outputs``: the model's own outputs (a dict for
    the soft families, the episode for RAM) for training terms."""

    logits: torch.Tensor
    attention: Attention | None
    outputs: Any = None


def canvases_to_tensor(images: np.ndarray | torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """(N, H, W) uint8 -> (N, 1, H, W) float32 in [0, 1] on ``device``."""
    tensor = images if isinstance(images, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(images))
    return tensor.to(device).unsqueeze(1).float().div(255.0)  # not in place: a float input may be the caller's


def check_canvas_batch(images: torch.Tensor, size: int) -> None:
    """ValueError unless ``images`` is a (B, 1, size, size) batch: what a model that reads the whole
    canvas (or crops it itself) takes."""
    if images.dim() != 4 or tuple(images.shape[1:]) != (1, size, size):
        raise ValueError(f"images must be (B, 1, {size}, {size}), got {tuple(images.shape)}")


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def single_step_episode(config) -> bool:
    """Whether training options ``config`` make a one-step episode, which leaves the state-to-state
    weights of a core that starts at rest unused (RAM's, DRAM's and the differentiable retina's), and
    the location policy too."""
    return config.n_glimpses * config.n_digits == 1


class Family:
    """Base class of an attention family; see the module docstring. Subclasses set the class
    attributes and override what differs from these defaults."""

    name: ClassVar[str]
    title: ClassVar[str]
    mode: ClassVar[str]
    Config: ClassVar[type]
    Model: ClassVar[type]
    reads_several_digits: ClassVar[bool] = False
    # the family --mode picks when no --arch is given; the registry refuses two for one mode
    default_for_mode: ClassVar[bool] = False
    # a capability the rest of the lab asks about instead of the mode: evaluation can average
    # sampled trajectories (--samples)
    samples_trajectories: ClassVar[bool] = False
    # the option that damps a state -> attention -> state loop whose gradient
    # :meth:`state_gradient_norms` measures step by step (DRAW: attention_into_core); None: no such loop
    state_loop: ClassVar[str | None] = None
    # the names of the P raw attention parameters whose gradient :meth:`state_gradient_norms` reports
    state_loop_parameters: ClassVar[tuple[str, ...]] = ()
    # preset name -> training options this family needs other than the preset's task (e.g. fewer steps)
    task_overrides: ClassVar[dict[str, dict]] = {}
    # training options this family reads (for the hyperparameter table: only what applies to a run)
    options: ClassVar[tuple[str, ...]] = ()
    # training options this family adds to train.py (name -> Option), grouped under it in --help;
    # options several families share are declared once, on a common base class (HardFamily's)
    own_options: ClassVar[dict[str, Option]] = {}
    # published test error % on the report's task (60x60 cluttered), if any (the papers' tables)
    paper_error: ClassVar[str | None] = None
    # epochs the comparison report trains it for at --budget 1 (what 2 CPU cores afford)
    report_epochs: ClassVar[int] = 10
    # the report trains it with 1 to 8 glimpses too (accuracy against the number of glimpses)
    report_sweep: ClassVar[bool] = False
    # whether the report trains its REINFORCE baselines side by side (--reinforce-samples K against the
    # learned baseline): a hard family's to say
    report_estimators: ClassVar[bool] = False
    # the paper's test error % at each number of glimpses on the report's task, ((glimpses, error), ...),
    # drawn beside the report's glimpse sweep
    paper_sweep: ClassVar[tuple[tuple[int, float], ...]] = ()
    # ``report.py --converged``: the training options beyond the task preset that make this family's
    # best-known recipe (its shipped checkpoint's), and the epochs after which its validation error
    # has levelled off; None keeps the short budget (the full-image baselines)
    converged_recipe: ClassVar[dict] = {}
    converged_epochs: ClassVar[int | None] = None
    # a short run that must learn: train.py options on the bundled subset, and the test accuracy it
    # must beat (chance is 0.1); the tests run it for every family that states one
    quick_recipe: ClassVar[dict | None] = None
    quick_floor: ClassVar[float] = 0.5
    # variants the comparison report trains beside the family: name -> (label, training options)
    report_variants: ClassVar[dict[str, tuple[str, dict]]] = {}
    # the paper's baselines made from this family that learn nothing about where to look, which the
    # report trains among its baselines: name -> (label, training options, the paper's error % or None)
    report_baselines: ClassVar[dict[str, tuple[str, dict, str | None]]] = {}
    # what the parameters of :meth:`attention_module` are, in words (for the report)
    attention_module_text: ClassVar[str | None] = None
    # False for a family that draws where it looks but learns nothing about it (a fixed crop):
    # it has no attention parameters, and the report measures no attention gradient for it
    learns_where_to_look: ClassVar[bool] = True
    # optional modules (attribute names) a model may have that a checkpoint it starts from
    # (--init-from) lacks: they keep their own initialisation (RAM's context network)
    added_modules: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ building
    def model_config(self, config) -> dict:
        """The model's config (a dict of the ``Config`` fields) from the training options ``config``
        (a TrainConfig, duck-typed: models import no training code)."""
        raise NotImplementedError

    def config(self, model_config: dict):
        """``Config(**model_config)``, with a message that names the family when it does not fit.
        Fields the config has dropped (its ``REMOVED``: name -> the value that behaves as now) are
        accepted at that value, so old checkpoints load, and refused with a message otherwise.
        Fields it gained (its ``ADDED``: name -> the value that behaves as the model did before)
        take that value where a checkpoint lacks them, so an old checkpoint loads and evaluates as the
        model it was trained as (train.py refuses to resume it as today's, another model)."""
        model_config = {**getattr(self.Config, "ADDED", {}),
                        **drop_removed(model_config, getattr(self.Config, "REMOVED", {}), f"{self.name} model")}
        try:
            return self.Config(**model_config)
        except TypeError as exc:
            raise ValueError(f"model config does not fit {self.Config.__name__}: {exc}") from exc

    def build(self, model_config: dict) -> nn.Module:
        return self.Model(self.config(model_config))

    def config_changes(self, was: dict, now: dict) -> dict[str, tuple]:
        """The fields in which the model config ``now`` builds another model than ``was`` (each read
        as :meth:`config` reads it, so a checkpoint from before a field was added compares at the
        value it was made with): name -> (value in ``was``, value in ``now``)."""
        before, after = (asdict(self.config(c)) for c in (was, now))
        return {name: (before.get(name), value) for name, value in after.items() if before.get(name) != value}

    # ------------------------------------------------------------------ reading canvases
    def run(self, model: nn.Module, images: np.ndarray, task: dict, *, draws: dict | None = None,
            sample: bool = False, record: bool = False) -> Look:
        """Logits and attention for (B, H, W) uint8 canvases. ``draws``: this batch's slice of
        :meth:`evaluation_draws`; ``sample``: follow the stochastic policy (hard families);
        ``record``: also return what the sensor read (for pictures). Default: a model that maps
        ``(B, 1, H, W)`` images to a dict with ``logits``; :meth:`attention` reads the rest."""
        out = model(canvases_to_tensor(images, model_device(model)))
        return Look(out["logits"], self.attention(out, task), out)

    def attention(self, outputs: dict, task: dict) -> Attention | None:
        """Where the model looked, from its outputs (None: a full-image network)."""
        return None

    def evaluation_draws(self, model: nn.Module, task: dict, n: int, seed: int,
                         sample: bool) -> dict[str, np.ndarray] | None:
        """Randomness of an evaluation over ``n`` canvases, drawn once for the whole set so that no
        score depends on the batch size (arrays with ``n`` rows, sliced per batch). None: the
        family evaluates deterministically."""
        return None

    def evaluation_text(self, model: nn.Module, task: dict, samples: int, seed: int) -> str:
        """How an evaluation of ``model`` chose what to look at, in words for the results
        (``samples``: the sampled trajectories averaged, where the family :attr:`samples_trajectories`)."""
        return "deterministic"

    # ------------------------------------------------------------------ training
    def schedule(self, model: nn.Module, config, progress: float) -> dict[str, float]:
        """Set what changes over the run besides the learning rate at ``progress`` (0..1); returns
        the values as scalars to log (TensorBoard names). Default: nothing."""
        return {}

    def training_forward(self, forward, images: torch.Tensor, generator: torch.Generator, rows: slice,
                         n_global: int) -> dict:
        """The model's outputs on this process's rows ``rows`` of the global batch of ``n_global``
        training canvases (images (B, 1, H, W)); randomness a family's training forward needs is
        drawn for the whole global batch from ``generator`` (seeded by the step) and sliced, so a
        run resumes exactly and N processes take the steps of one. Default: ``forward(images)``."""
        return forward(images)

    def training_terms(self, look: Look, config) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """Loss terms beyond cross-entropy (None: none) and detached metrics, for backprop training."""
        return None, {}

    # ------------------------------------------------------------------ costs
    def pixels_read(self, task: dict, model_config: dict) -> dict[str, int]:
        """Per image, by definition: ``sensor_values`` (numbers the learned part receives from the
        image), ``canvas_pixels_touched`` (canvas pixels that enter them, once per step),
        ``input_pixels`` (H * W). Default: a network that reads every pixel once."""
        area = int(task["canvas_size"]) ** 2
        return {"sensor_values": area, "canvas_pixels_touched": area, "input_pixels": area}

    def attention_module(self, model: nn.Module) -> nn.Module | None:
        """The module whose parameters decide where the model looks (None: no attention)."""
        return None

    def reparameterised_locations(self, model_config: dict) -> bool:
        """Capability: a model of this config draws where it looks from a Gaussian policy in its
        training forward, with the gradient through the drawn locations; then
        :meth:`location_log_prob` gives the score function REINFORCE would use for the same policy
        (glimpse/gradient_noise.py compares the two estimators)."""
        return False

    def location_log_prob(self, model: nn.Module, outputs: dict) -> torch.Tensor:
        """(B,) sum over steps of the log-density of the locations the training forward drew
        (``outputs``), differentiable in the policy's parameters only, the states it read them from
        detached (the actions before each are fixed samples)."""
        raise NotImplementedError(f"{self.name} draws no reparameterised locations")

    def exact_backward(self, model: nn.Module) -> contextlib.AbstractContextManager:
        """A context inside which the model's backward pass is the exact gradient of its loss
        (any damping of a gradient path off; the forward pass unchanged). Default: it already is;
        a family whose options damp a gradient path must override it where it measures the exact
        gradient (only :meth:`reparameterised_locations` families are measured so: the differentiable
        retina does; DRAW's ``attention_into_core`` and RAM's ``reinforce_into_core`` are not measured)."""
        return contextlib.nullcontext()

    def run_label(self, config) -> str:
        """How a run of training options ``config`` starts its default name: the family's name, or
        what else a variant of it is (RAM with random glimpses is a baseline, not RAM)."""
        return self.name

    def leaves_parameters_unused(self, config) -> bool:
        """Whether a run of training options ``config`` leaves some parameters without a gradient
        (what DistributedDataParallel must be told, at the cost of a search of the graph each step).
        Default: none; a family with a core that starts at rest overrides it (:func:`single_step_episode`)."""
        return False

    def sensor_and_gradient(self, train_config: dict) -> tuple[str, str] | None:
        """For the report's "sensor against gradient" section: what a run of ``train_config`` reads
        and how it learns where to look, in words; None: not a row of that section."""
        return None

    def state_gradient_norms(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                             share: float | None = None) -> dict[str, torch.Tensor]:
        """For a family with a :attr:`state_loop`: per step t, the norm of dL/dh_t (``state`` (T,)),
        of dL/d(the raw attention parameters) (``attention`` (T, P)) and of the whole parameter
        gradient (``parameters``), with ``share`` of the attention gradient let into the state."""
        raise NotImplementedError(f"{self.name} has no state -> attention -> state loop to measure")

    @property
    def has_attention(self) -> bool:
        return self.mode != "full"

    @property
    def learns_by_reinforce(self) -> bool:
        """Whether it learns where to look by REINFORCE through the env (its mode is "hard")."""
        return self.mode == "hard"

    def __repr__(self) -> str:
        return f"<family {self.name}: {self.title}>"


def drop_removed(values: dict, removed: dict, what: str) -> dict:
    """``values`` without the keys of ``removed`` (name -> the value that behaves as this version
    does); a removed option at another value raises ValueError: this version cannot do that."""
    refused = {k: values[k] for k in removed if k in values and values[k] != removed[k]}
    if refused:
        settings = ", ".join(f"{k}={v!r}" for k, v in refused.items())
        raise ValueError(f"this {what} was made with {settings}: an option this version no longer has "
                         f"(removed; it only loads at its old default: "
                         f"{', '.join(f'{k}={removed[k]!r}' for k in refused)})")
    return {k: v for k, v in values.items() if k not in removed}


_REGISTRY: dict[str, Family] = {}


def register(family_class: type[Family]) -> type[Family]:
    """Class decorator: register one instance of a :class:`Family` subclass under its ``name``.
    Refuses an unknown mode, a second family of the same name and a second default of a mode."""
    family = family_class()
    if family.mode not in MODES:
        raise ValueError(f"{family_class.__name__}.mode must be one of {MODES}, got {family.mode!r}")
    if family.name in _REGISTRY and type(_REGISTRY[family.name]) is not family_class:
        raise ValueError(f"two families are called {family.name!r}")
    rivals = [f.name for f in _REGISTRY.values()
              if f.default_for_mode and f.mode == family.mode and f.name != family.name]
    if family.default_for_mode and rivals:
        raise ValueError(f"{family.name} and {rivals[0]} both declare themselves the default of --mode {family.mode}")
    _REGISTRY[family.name] = family
    return family_class


def find_family(name: str | None) -> Family | None:
    """The family registered under ``name``, or None (no such family, or no name)."""
    return _REGISTRY.get(name) if name is not None else None


def get_family(name: str) -> Family:
    if name not in _REGISTRY:
        raise ValueError(f"unknown family {name!r}; the registered families are {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def default_family(mode: str) -> Family:
    """The family ``--mode mode`` trains when no ``--arch`` is given (declared by the family)."""
    for family in _REGISTRY.values():
        if family.mode == mode and family.default_for_mode:
            return family
    raise ValueError(f"no registered family is the default of --mode {mode!r}")


def list_families(mode: str | None = None) -> list[Family]:
    """Registered families in registration order, optionally only those of one ``mode``."""
    return [f for f in _REGISTRY.values() if mode is None or f.mode == mode]


def build_model(arch: str, model_config: dict) -> nn.Module:
    """Rebuild a model from what a checkpoint stores: its family's name (the checkpoint's ``kind``)
    and ``model_config``."""
    return get_family(arch).build(model_config)


def declared_options() -> list[tuple[str, dict[str, Option]]]:
    """The options the registered families declare (``own_options``), grouped by the families that
    read them (those naming the option in ``options``; else those of the declaring class), in
    registration order: (readers, e.g. "ram, dram", {name: Option}). DRAW declares
    ``attention_into_core`` and the differentiable retina reads it too: "draw, ram-diff".
    ValueError if two classes declare one name."""
    groups: dict[type, dict[str, Option]] = {}
    for family in _REGISTRY.values():
        for cls in reversed(type(family).__mro__):
            if "own_options" in cls.__dict__ and cls.__dict__["own_options"]:
                groups.setdefault(cls, cls.__dict__["own_options"])
    seen: dict[str, type] = {}
    for cls, options in groups.items():
        for name in options:
            if name in seen:
                raise ValueError(f"{cls.__name__} and {seen[name].__name__} both declare the option {name!r}")
            seen[name] = cls
    by_readers: dict[str, dict[str, Option]] = {}
    for cls, options in groups.items():
        declarers = ", ".join(f.name for f in _REGISTRY.values() if isinstance(f, cls))
        for name, option in options.items():
            readers = ", ".join(f.name for f in _REGISTRY.values() if name in f.options) or declarers
            by_readers.setdefault(readers, {})[name] = option
    return list(by_readers.items())


def families_table() -> str:
    """The registered families as a markdown table (docs/training.md holds it between
    ``<!-- families:start -->`` and ``<!-- families:end -->``; scripts/docs_tables.py writes it)."""
    lines = ["| `--mode` | `--arch` | family | reads several digits | options it reads |", "|---|---|---|---|---|"]
    for mode in MODES:
        for family in list_families(mode):
            arch = f"`{family.name}`" + (" (default)" if family.default_for_mode else "")
            options = ", ".join(f"`--{name.replace('_', '-')}`" for name in family.options) or "-"
            lines.append(f"| `{mode}` | {arch} | {family.title} | {'yes' if family.reads_several_digits else 'no'} "
                         f"| {options} |")
    return "\n".join(lines)
