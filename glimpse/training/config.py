"""Every training hyperparameter in one dataclass, the paper presets, and the CLI built from them.

Each field's ``help`` is its --help text, so the command line documents itself.
"""
from __future__ import annotations

import argparse
from dataclasses import InitVar, asdict, dataclass, field, fields

from glimpse.canvas import DIGIT_SIZE, digits_that_fit

MODES = ("hard", "soft", "full")
SOFT_ARCHS = ("draw", "sat")
FULL_ARCHS = ("cnn", "fc")


def _opt(default, help: str, choices=None):
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class TrainConfig:
    mode: str = _opt("hard", "hard: RAM trained with REINFORCE through the env; soft: DRAW or "
                     "Show-Attend-Tell trained by backpropagation; full: a baseline that reads the whole "
                     "image (no attention)", MODES)
    soft_arch: str = _opt("sat", "soft-attention model (mode soft): draw (filterbank read) or sat "
                          "(Show-Attend-Tell over CNN features)", SOFT_ARCHS)
    full_arch: str = _opt("cnn", "full-image baseline (mode full): cnn (the paper's conv net: 8 10x10 filters, "
                          "stride 5, then 256 units) or fc (2 layers of 256)", FULL_ARCHS)
    preset: str = _opt("cluttered60", "task and model sizes of a paper setting; any option below overrides "
                       "it", None)
    # the task (canvas recipe and sensor)
    canvas_size: int = _opt(60, "canvas side in pixels")
    n_clutter: int = _opt(4, "8x8 clutter pieces per canvas")
    centred_digit: bool = _opt(False, "put the digit in the centre (plain MNIST) instead of at random")
    n_digits: int = _opt(1, "digits per canvas, at random non-overlapping places, labelled left to right; more "
                         "than 1 is read out as a sequence, --n-glimpses steps per digit, by RAM (--mode hard) "
                         "or Show-Attend-Tell (--mode soft --soft-arch sat)")
    glimpse_size: int = _opt(12, "hard: side g of each glimpse scale, in pixels")
    n_scales: int = _opt(3, "hard: scales per glimpse, each twice as wide as the previous")
    n_glimpses: int = _opt(6, "glimpses per image (RAM, DRAW) or attention steps (Show-Attend-Tell)")
    first_location: str = _opt("centre", "hard: where the first glimpse is taken", ("centre", "random"))
    # RAM
    core: str = _opt("rnn", "hard: core network, the paper's ReLU RNN or an LSTM", ("rnn", "lstm"))
    hidden_size: int = _opt(256, "core / decoder hidden size")
    location_std: float = _opt(0.15, "hard: std of the Gaussian location policy (fixed, or initial if learned)")
    learn_std: bool = _opt(False, "hard: learn the policy std from the core state instead of fixing it")
    location_std_final: float = _opt(0.0, "hard: anneal the fixed policy std from --location-std to this over "
                                     "the run, on the learning rate's cosine: wide search early, training paths "
                                     "close to the deterministic ones late (0: no annealing)")
    location_hidden: int = _opt(0, "hard: hidden ReLU units between the core state and the policy mean (0: a "
                                "linear location network, as in the paper)")
    random_glimpses: bool = _opt(False, "hard: glimpse at uniformly random locations instead of learned ones (the "
                                 "paper's random-glimpse baseline: no policy, no REINFORCE)")
    reinforce_into_core: float = _opt(0.0, "hard: share of the REINFORCE gradient that goes on from the location "
                                      "network into the core and glimpse network: 0 stops it there, 1 is the paper; "
                                      "0.1 lets the policy shape the features (see README, Training)")
    reinforce_weight: float = _opt(1.0, "hard: weight of the REINFORCE term in the hybrid loss")
    baseline_weight: float = _opt(1.0, "hard: weight of the baseline's squared error")
    # soft attention
    read_size: int = _opt(12, "draw: side N of the N x N filterbank read")
    draw_sigma: str = _opt("pixels", "draw: units of the filters' learned sigma: pixels (the paper) or stride "
                           "(sigma follows the grid's zoom, so zoomed-in reads stay smooth)", ("pixels", "stride"))
    draw_min_sigma: float = _opt(0.0, "draw: smooth floor on the filters' sigma in pixels (0: none, the paper); "
                                 "0.5 is about bilinear sampling (did not stop DRAW's 100x100 collapses: README)")
    draw_min_sigma_strides: float = _opt(0.0, "draw: smooth floor on the filters' sigma in strides, so it follows "
                                         "the zoom (0: none, the paper; below 0.5): zoomed-in reads cannot "
                                         "point-sample the image and alias")
    attention_into_core: float = _opt(1.0, "draw: share of the gradient of the attention parameters that flows "
                                      "back into the LSTM state (1: the paper); the attention head keeps its exact "
                                      "gradient. Below 1 it damps the loop state -> read -> state that explodes "
                                      "on 100x100 (README, Results)")
    attention_weight: float = _opt(0.0, "sat: weight of the doubly stochastic attention regulariser")
    # optimisation
    optimizer: str = _opt("adam", "optimiser", ("adam", "sgd"))
    lr: float = _opt(1e-3, "peak learning rate")
    momentum: float = _opt(0.9, "sgd momentum")
    weight_decay: float = _opt(0.0, "L2 weight decay")
    lr_schedule: str = _opt("cosine", "learning-rate schedule over the run (after a short warm-up)",
                            ("cosine", "constant"))
    warmup_steps: int = _opt(100, "linear learning-rate warm-up steps")
    grad_clip: float = _opt(5.0, "clip the global gradient norm to this (0: off)")
    batch_size: int = _opt(128, "images per step (hard: the number of parallel envs); under torchrun the global "
                           "batch, split evenly over the processes")
    epochs: int = _opt(5, "passes over the training digits (fresh clutter every time)")
    # the run
    seed: int = _opt(0, "seed of everything: weights, data order, clutter, location sampling")
    data_dir: str | None = _opt(None, "MNIST root in torchvision's layout, or 'bundled' for the bundled subset "
                                "(default: $GLIMPSE_DATA, ./data, download, bundled subset)")
    run_dir: str = _opt("runs", "where runs (TensorBoard logs and checkpoints) are written")
    run_name: str | None = _opt(None, "sub-directory of --run-dir (default: derived from mode, preset, seed)")
    threads: int = _opt(0, "torch CPU threads (0: torch's default)")
    device: str = _opt("auto", "where to train: auto (a GPU when there is one), cpu or cuda; under torchrun each "
                       "process takes GPU LOCAL_RANK", ("auto", "cpu", "cuda"))
    log_every: int = _opt(50, "steps between scalar logs")
    image_every: int = _opt(500, "steps between TensorBoard images (0: only at validation)")
    checkpoint_every: int = _opt(200, "steps between checkpoints of the running state (and every epoch)")
    val_every: int = _opt(0, "steps between validations (0: once per epoch)")
    eval_batch_size: int = _opt(500, "batch size for validation and test")
    max_steps: int = _opt(0, "stop after this many steps in all (0: run all epochs); for smoke tests")

    # runs saved before --reinforce-into-core recorded this bool instead (True: 0, False: 1)
    detach_policy_input: InitVar[bool | None] = None

    def __post_init__(self, detach_policy_input: bool | None = None):
        if detach_policy_input is not None:
            self.reinforce_into_core = 0.0 if detach_policy_input else 1.0
        if not 0 <= self.reinforce_into_core <= 1:
            raise ValueError(f"--reinforce-into-core must be in [0, 1], got {self.reinforce_into_core}")
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise ValueError(f"--{f.name.replace('_', '-')} must be one of {choices}, got {getattr(self, f.name)!r}")
        for name in ("batch_size", "epochs", "n_glimpses", "hidden_size", "eval_batch_size", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "location_std"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(self, name)}")
        if self.location_hidden < 0:
            raise ValueError(f"--location-hidden must be >= 0, got {self.location_hidden}")
        if self.location_std_final < 0:
            raise ValueError(f"--location-std-final must be >= 0, got {self.location_std_final}")
        if self.location_std_final and self.learn_std:
            raise ValueError("--location-std-final anneals a fixed std; it cannot be combined with --learn-std")
        self._check_n_digits()
        if self.preset not in PRESETS:
            raise ValueError(f"--preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        from envs.task import GlimpseTask  # fail on impossible sizes before any data is loaded

        GlimpseTask(canvas_size=self.canvas_size, n_clutter=self.n_clutter, centred_digit=self.centred_digit,
                    n_digits=self.n_digits, glimpse_size=self.glimpse_size, n_scales=self.n_scales,
                    n_glimpses=self.n_glimpses, first_location=self.first_location)
        if self.model_kind == "draw":
            from glimpse.models.draw import DRAWConfig

            try:
                DRAWConfig(canvas_size=self.canvas_size, read_size=self.read_size, n_glimpses=self.n_glimpses,
                           hidden_size=self.hidden_size, sigma_units=self.draw_sigma, min_sigma=self.draw_min_sigma,
                           min_sigma_strides=self.draw_min_sigma_strides, attention_into_core=self.attention_into_core)
            except ValueError as exc:
                raise ValueError(f"--draw-min-sigma, --draw-min-sigma-strides or --attention-into-core: {exc}") from exc

    def _check_n_digits(self) -> None:
        if isinstance(self.n_digits, bool) or not isinstance(self.n_digits, int) or self.n_digits < 1:
            raise ValueError(f"--n-digits must be an integer >= 1, got {self.n_digits!r}")
        if self.n_digits == 1:
            return
        if self.model_kind not in ("ram", "sat"):
            raise ValueError(f"--n-digits {self.n_digits}: only RAM (--mode hard) and Show-Attend-Tell (--mode soft "
                             f"--soft-arch sat) read several digits; {self.model_kind} classifies one digit per canvas")
        if self.centred_digit:
            raise ValueError(f"--n-digits {self.n_digits} cannot be combined with --centred-digit")
        fits = digits_that_fit(self.canvas_size)
        if self.n_digits > fits:
            raise ValueError(f"--n-digits {self.n_digits}: at most {fits} non-overlapping {DIGIT_SIZE}x{DIGIT_SIZE} "
                             f"digits fit on a {self.canvas_size}x{self.canvas_size} canvas")

    @property
    def model_kind(self) -> str:
        return {"hard": "ram", "soft": self.soft_arch, "full": self.full_arch}[self.mode]

    def to_dict(self) -> dict:
        return asdict(self)


# Paper settings (Mnih et al. 2014; DRAW 2015). Soft models share the canvases; their own sizes are defaults.
PRESETS: dict[str, dict] = {
    "mnist28": dict(canvas_size=28, n_clutter=0, centred_digit=True, glimpse_size=8, n_scales=1, n_glimpses=6),
    "translated60": dict(canvas_size=60, n_clutter=0, centred_digit=False, glimpse_size=12, n_scales=3, n_glimpses=6),
    "cluttered60": dict(canvas_size=60, n_clutter=4, centred_digit=False, glimpse_size=12, n_scales=3, n_glimpses=6),
    "cluttered100": dict(canvas_size=100, n_clutter=8, centred_digit=False, glimpse_size=12, n_scales=4, n_glimpses=8),
    # two digits to read left to right, like Ba et al. 2015's two-digit task; glimpses per digit
    "multi100": dict(canvas_size=100, n_clutter=8, centred_digit=False, n_digits=2, glimpse_size=12, n_scales=4,
                     n_glimpses=8),
}
SOFT_PRESET_OVERRIDES: dict[tuple[str, str], dict] = {
    ("sat", "cluttered60"): dict(n_glimpses=4),
    ("sat", "cluttered100"): dict(n_glimpses=4),
    ("sat", "multi100"): dict(n_glimpses=4),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Train hard (RAM) or soft (DRAW, Show-Attend-Tell) visual attention on cluttered MNIST, "
                    "or a full-image baseline (FC, conv net).",
    )
    for f in fields(TrainConfig):
        flag = f"--{f.name.replace('_', '-')}"
        help = f.metadata["help"]  # defaults are None here (so presets can fill in): state the real one
        kwargs = dict(default=None, help=help if "(default:" in help else f"{help} (default: {f.default})")
        if f.name == "preset":
            kwargs["choices"] = sorted(PRESETS)
        elif f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        if f.type in ("bool", bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, **kwargs)
    parser.add_argument("--resume", metavar="RUN_DIR_OR_CHECKPOINT", default=None,
                        help="continue an interrupted run exactly from its last checkpoint; only --epochs, "
                             "--max-steps and --threads may change")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Preset values, then whatever was given explicitly on the command line."""
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None}
    return resolve_config(given)


def resolve_config(overrides: dict) -> TrainConfig:
    base = TrainConfig(**{k: v for k, v in overrides.items() if k in ("mode", "soft_arch", "preset")})
    values = dict(PRESETS[base.preset])
    if base.mode == "soft":
        values.update(SOFT_PRESET_OVERRIDES.get((base.soft_arch, base.preset), {}))
    values.update(overrides)
    return TrainConfig(**values)
