"""Every training hyperparameter in one dataclass, the presets, and the CLI built from them.

Each field's ``help`` is its --help text, so the command line documents itself. The presets are
the task table of envs/task.py; a family that needs other task settings says so in its own module
(``Family.task_overrides``). The model kinds each mode offers come from the registry.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import InitVar, asdict, dataclass, field, fields, make_dataclass

from envs.task import TASKS, GlimpseTask
from glimpse.checkpoint import TASK_FIELDS
from glimpse.cli import MAX_THREADS, ArgumentParser, option_flags
from glimpse.models import default_family, find_family, get_family, list_families
from glimpse.models.registry import MODES, Family, declared_options, drop_removed

# the architecture flags --arch replaced, each for its own mode; still accepted, and read from old checkpoints
ARCH_ALIASES = {"soft_arch": "soft", "full_arch": "full"}
PRESETS = TASKS
MAX_BATCH = 60_000  # MNIST's training digits: no batch can be larger (the loaded split is checked too)
MAX_NAME_BYTES = 200  # --run-name: file systems take 255 bytes per name
MAX_HIDDEN = 8192  # --hidden-size: the recipes use 256
# Options of earlier versions whose experiments are over (their findings are in docs/), with the
# value that behaves as this version does: a run or checkpoint that used them at that value loads.
REMOVED_OPTIONS = {"learn_std": False, "location_hidden": 0, "reinforce_weight": 1.0, "baseline_weight": 1.0,
                   "draw_sigma": "pixels", "draw_min_sigma": 0.0, "optimizer": "adam", "momentum": 0.9,
                   "weight_decay": 0.0, "lr_schedule": "cosine",
                   "train_shift": 0}


def _opt(default, help: str, choices=None):
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class GeneralOptions:
    """The options every run has (the task, optimisation, the run); :data:`TrainConfig` adds the
    options the families declare (``Family.own_options``). Stored flat in checkpoints."""

    mode: str = _opt("hard", "how the model learns: hard, hard attention trained with REINFORCE through the env; "
                     "soft, soft attention trained by backpropagation; full, a baseline that reads the whole image "
                     "(no attention); --arch picks the family (default: the mode of --arch, if given; else hard)", MODES)
    arch: str | None = _opt(None, "the family within --mode: " + "; ".join(
        f"{mode}: " + ", ".join(f"{f.name} ({f.title.split(' (')[0]}{', default' if f.default_for_mode else ''})"
                                for f in list_families(mode)) for mode in MODES) + " (default: the mode's default)")
    soft_arch: str | None = _opt(None, "replaced by --arch (--mode soft --soft-arch X is --mode soft --arch X; "
                                 "still accepted) (default: not given)")
    full_arch: str | None = _opt(None, "replaced by --arch (--mode full --full-arch X is --mode full --arch X; "
                                 "still accepted) (default: not given)")
    preset: str = _opt("cluttered60", "task and model sizes of a paper setting; any option below overrides "
                       "it", None)
    # the task (canvas recipe and sensor)
    canvas_size: int = _opt(60, "canvas side in pixels")
    n_clutter: int = _opt(4, "8x8 clutter pieces per canvas")
    centred_digit: bool = _opt(False, "put the digit in the centre (plain MNIST) instead of at random")
    n_digits: int = _opt(1, "digits per canvas, at random non-overlapping places, labelled left to right; more "
                         "than 1 is read out as a sequence, --n-glimpses steps per digit, by the families that "
                         "read sequences: " + ", ".join(f.name for f in list_families() if f.reads_several_digits))
    glimpse_size: int = _opt(12, "hard: side g of each glimpse scale, in pixels")
    n_scales: int = _opt(3, "hard: scales per glimpse, each twice as wide as the previous")
    n_glimpses: int = _opt(6, "glimpses, reads, attention steps or crops per digit (families that need other "
                           "counts than a preset's say so: see glimpse/models/)")
    first_location: str = _opt("centre", "hard: where the first glimpse is taken", ("centre", "random"))
    context_size: int = _opt(0, "hard: side of a coarse view of the whole canvas (area averages) from which a "
                             "context network sets the core's first state, as in Ba et al. 2015's DRAM (0: none)")
    hidden_size: int = _opt(256, "core / decoder hidden size")
    # optimisation
    lr: float = _opt(1e-3, "peak learning rate")
    warmup_steps: int = _opt(100, "linear learning-rate warm-up steps")
    grad_clip: float = _opt(5.0, "clip the global gradient norm to this (0: off)")
    batch_size: int = _opt(128, "images per step (hard: the number of parallel envs); under torchrun the global "
                           "batch, split evenly over the processes")
    epochs: int = _opt(5, "passes over the training digits (fresh clutter every time)")
    init_from: str | None = _opt(None, "start from the weights of this checkpoint, a model of the same family and "
                                 "sizes trained on any task (a one-digit reader to learn two digits, say); the "
                                 "optimizer, schedule and step count start afresh (default: random initial weights)")
    # the run
    seed: int = _opt(0, "seed of everything: weights, data order, clutter, location sampling")
    data_dir: str | None = _opt(None, "MNIST root in torchvision's layout, or 'bundled' for the bundled subset "
                                "(default: $GLIMPSE_DATA, ./data, download, bundled subset)")
    run_dir: str = _opt("runs", "where runs (TensorBoard logs and checkpoints) are written")
    run_name: str | None = _opt(None, "sub-directory of --run-dir (default: family-preset-seed-time, e.g. ram-cluttered60-seed0-20261129-131133)")
    threads: int = _opt(1, "torch CPU threads (1: these small models lose speed to more threads on a busy "
                           "machine; 0: torch's default, one per core)")
    device: str = _opt("auto", "where to train: auto (a GPU when there is one), cpu or cuda; under torchrun each "
                       "process takes GPU LOCAL_RANK", ("auto", "cpu", "cuda"))
    compile: str = _opt("off", "compile each part of the model with torch.compile in this mode: off; default; "
                        "reduce-overhead (CUDA graphs); max-autotune. The first steps pay for compiling; on a CPU it "
                        "needs a C++ compiler. Measured slower than off on a CPU and on a GPU (docs/speed.md)",
                        ("off", "default", "reduce-overhead", "max-autotune"))
    log_every: int = _opt(50, "steps between scalar logs")
    image_every: int = _opt(500, "steps between TensorBoard images (0: only at validation)")
    checkpoint_every: int = _opt(200, "steps between checkpoints of the running state (last.pt; also at every validation)")
    val_every: int = _opt(0, "steps between validations (0: once per epoch)")
    eval_batch_size: int = _opt(500, "batch size for validation and test")
    max_steps: int = _opt(0, "stop after this many steps in all (0: run all epochs); for smoke tests")

    # runs saved before --reinforce-into-core recorded this bool instead (True: 0, False: 1)
    detach_policy_input: InitVar[bool | None] = None

    def __post_init__(self, detach_policy_input: bool | None = None):
        if detach_policy_input is not None:
            self.reinforce_into_core = 0.0 if detach_policy_input else 1.0
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise ValueError(f"--{f.name.replace('_', '-')} must be one of {choices}, got {getattr(self, f.name)!r}")
        self._resolve_arch()
        self._check_numbers()
        self._check_run_name()
        if self.preset not in PRESETS:
            raise ValueError(f"--preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        family = self.family
        if self.n_digits != 1 and not isinstance(self.n_digits, bool) and isinstance(self.n_digits, int) \
                and not family.reads_several_digits:
            readers = ", ".join(f.name for f in list_families() if f.reads_several_digits)
            raise ValueError(f"--n-digits {self.n_digits}: {family.name} classifies one digit per canvas; "
                             f"the families that read several are {readers}")
        try:  # fail on impossible sizes before any data is loaded
            GlimpseTask(**self.task())
        except ValueError as exc:  # GlimpseTask names its fields: name the flags instead
            fields_named = "|".join(f.name for f in fields(GlimpseTask))
            raise ValueError(re.sub(rf"\b({fields_named})\b", lambda m: "--" + m.group(1).replace("_", "-"),
                                    str(exc))) from exc
        try:
            family.config(family.model_config(self))
        except ValueError as exc:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in family.options)
            raise ValueError(f"{family.name} options ({flags}): {exc}") from exc

    def _resolve_arch(self) -> None:
        """--arch, from the replaced --soft-arch/--full-arch of the run's own mode (the other
        mode's are ignored: old checkpoints store both at their defaults) or the mode's default
        family; afterwards ``arch`` names the family and the aliases are None."""
        alias = next((name for name, mode in ARCH_ALIASES.items() if mode == self.mode), None)
        named = getattr(self, alias) if alias else None
        if named is not None and self.arch is not None and named != self.arch:
            raise ValueError(f"--arch {self.arch} and --{alias.replace('_', '-')} {named} disagree "
                             f"(--{alias.replace('_', '-')} is the old spelling of --arch)")
        arch = self.arch or named or default_family(self.mode).name
        names = [f.name for f in list_families(self.mode)]
        if arch not in names:
            owner = find_family(arch)
            why = (f"{arch} is a family of --mode {owner.mode}" if owner else
                   f"there is no family {arch!r} (registered: {', '.join(f.name for f in list_families())}; a "
                   f"new family's module is imported in glimpse/models/__init__.py)")
            raise ValueError(f"--arch must be one of {names} with --mode {self.mode}: {why}")
        self.arch, self.soft_arch, self.full_arch = arch, None, None

    def _check_numbers(self) -> None:
        """Ranges and finiteness of every numeric option, before anything is loaded or created."""
        def flag(name):
            return "--" + name.replace("_", "-")

        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{flag(f.name)} must be an integer, got {value!r}")
            if f.type in ("float", float) and not math.isfinite(value):
                raise ValueError(f"{flag(f.name)} must be a finite number, got {value}")
        for f in fields(self):  # the ranges the families declare for their options
            if "option" in f.metadata:
                f.metadata["option"].check(flag(f.name), getattr(self, f.name))
        for name in ("batch_size", "epochs", "n_glimpses", "hidden_size", "eval_batch_size", "log_every",
                     "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{flag(name)} must be >= 1, got {getattr(self, name)}")
        for name in ("threads", "max_steps", "warmup_steps", "val_every", "image_every", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"{flag(name)} must be >= 0, got {getattr(self, name)}")
        for name in ("lr",):
            if not getattr(self, name) > 0:
                raise ValueError(f"{flag(name)} must be > 0, got {getattr(self, name)}")
        for name in ("grad_clip",):
            if getattr(self, name) < 0:
                raise ValueError(f"{flag(name)} must be >= 0, got {getattr(self, name)}")
        if self.seed >= 2**32:
            raise ValueError(f"--seed must be below 2**32, got {self.seed}")
        if self.batch_size > MAX_BATCH or self.eval_batch_size > MAX_BATCH:
            name = "batch_size" if self.batch_size > MAX_BATCH else "eval_batch_size"
            raise ValueError(f"{flag(name)} {getattr(self, name)} is more than MNIST has training digits "
                             f"({MAX_BATCH})")
        if self.hidden_size > MAX_HIDDEN:
            raise ValueError(f"--hidden-size must be at most {MAX_HIDDEN}, got {self.hidden_size}")
        if self.threads > MAX_THREADS:
            raise ValueError(f"--threads {self.threads} is more than this library allows ({MAX_THREADS})")

    def _check_run_name(self) -> None:
        """A run name names one directory inside --run-dir: no separators, no '.' or '..'; --run-dir
        names a directory (an empty one would write the run into the current directory)."""
        if not str(self.run_dir).strip():
            raise ValueError("--run-dir must name a directory, got ''")
        name = self.run_name
        if name is None:
            return
        if not name or name in (".", "..") or any(sep in name for sep in ("/", "\\", os.sep)) or "\0" in name:
            raise ValueError(f"--run-name must be a plain name (no path separators, not '.' or '..'), got {name!r}")
        if len(name.encode()) > MAX_NAME_BYTES:  # what a file system takes for one name, with room for a suffix
            raise ValueError(f"--run-name must be at most {MAX_NAME_BYTES} bytes, got {len(name.encode())}")

    @property
    def family(self) -> Family:
        """The registry's entry for the model this run trains."""
        return get_family(self.arch)

    def task(self) -> dict:
        """The canvas recipe and sensor, as GlimpseTask fields: stored in checkpoints, checked
        against evaluation images. ``n_digits`` appears only when it is above 1, so single-digit
        tasks keep the keys every earlier checkpoint has (readers use ``task.get("n_digits", 1)``); so
        does ``context_size`` when it is above 0."""
        task = {key: getattr(self, key) for key in TASK_FIELDS}
        for key, default in (("n_digits", 1), ("context_size", 0)):
            if getattr(self, key) != default:
                task[key] = getattr(self, key)
        return task

    def applicable(self) -> dict:
        """The options that apply to this run: the task, optimisation and run options, and the
        options of its own family (a DRAW run has no --core)."""
        family_options = {name for f in list_families() for name in f.options}
        mine = set(self.family.options)
        return {k: v for k, v in self.to_dict().items()
                if (k not in family_options or k in mine) and k not in ARCH_ALIASES}

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """A config as checkpoints store it; options this version removed load at their old default."""
        return cls(**drop_removed(values, REMOVED_OPTIONS, "run"))

    def to_dict(self) -> dict:
        return asdict(self)


def _family_fields() -> list[tuple]:
    """The dataclass fields of the options the families declare, in registration order."""
    out = []
    for readers, options in declared_options():
        for name, option in options.items():
            metadata = {"help": option.help, "choices": option.choices, "option": option, "group": readers}
            out.append((name, type(option.default), field(default=option.default, metadata=metadata)))
    return out


# every training option: the general ones, then those each family declares (glimpse/models/)
TrainConfig = make_dataclass("TrainConfig", _family_fields(), bases=(GeneralOptions,), namespace={"__module__": __name__})



def family_options(family: Family) -> dict:
    """The training options that select ``family``: its mode and ``--arch`` (``--mode soft --arch stn``)."""
    return {"mode": family.mode, "arch": family.name}


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Train hard (" + ", ".join(f.name for f in list_families("hard")) + ") or soft ("
                    + ", ".join(f.name for f in list_families("soft")) + ") visual attention on cluttered MNIST, "
                    "or a full-image baseline (" + ", ".join(f.name for f in list_families("full")) + ").",
    )
    groups = {}  # the options a family declares, under it: "ram, dram options"
    for f in fields(TrainConfig):
        flag = f"--{f.name.replace('_', '-')}"
        help = f.metadata["help"]  # defaults are None here (so presets can fill in): state the real one
        kwargs = dict(default=None, help=help if "(default:" in help else f"{help} (default: {f.default})")
        if f.name == "preset":
            kwargs["choices"] = sorted(PRESETS)
        elif f.metadata.get("choices"):
            kwargs["choices"] = f.metadata["choices"]
        where = parser
        if "group" in f.metadata:
            if f.metadata["group"] not in groups:
                groups[f.metadata["group"]] = parser.add_argument_group(f"{f.metadata['group']} options")
            where = groups[f.metadata["group"]]
        if f.type in ("bool", bool):
            where.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
        else:
            parse = {"int": int, "float": float, int: int, float: float}.get(f.type, str)
            where.add_argument(flag, type=parse, **kwargs)
    parser.add_argument("--resume", metavar="RUN_DIR_OR_CHECKPOINT", default=None,
                        help="continue an interrupted run exactly from its last checkpoint; only --epochs, "
                             "--max-steps, --threads, --data-dir, --device and --compile may change (on another "
                             "device the run goes on, but not bit for bit: CPU and CUDA generators draw different "
                             "numbers; compiled kernels may round differently)")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Preset values, then whatever was given explicitly on the command line. An option that the
    chosen model does not have (``--reinforce-samples`` for DRAW) is refused, not silently dropped."""
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None}
    config = resolve_config(given)
    # the old spelling of --arch is welcome for its own mode
    stray = [name for name in given if name not in config.applicable() and ARCH_ALIASES.get(name) != config.mode]
    if stray:
        raise ValueError(f"{config.family.name} ({config.family.title}) does not use "
                         + "; ".join(_owner(name) for name in stray))
    return config


def _owner(name: str) -> str:
    """'--flag (what has it)': an option of other families, or the architecture flag of another mode."""
    flag = "--" + name.replace("_", "-")
    if name in ARCH_ALIASES:
        return f"{flag} (the old spelling of --arch for --mode {ARCH_ALIASES[name]})"
    return f"{flag} (an option of {', '.join(f.name for f in list_families() if name in f.options)})"


def resolve_config(overrides: dict) -> TrainConfig:
    owner = find_family(overrides.get("arch"))
    if owner is not None and "mode" not in overrides:  # family names are unique: --arch stn is --mode soft --arch stn
        overrides = {**overrides, "mode": owner.mode}
    base = TrainConfig(**{k: v for k, v in overrides.items() if k in ("mode", "arch", *ARCH_ALIASES, "preset")})
    values = dict(PRESETS[base.preset])
    values.update(base.family.task_overrides.get(base.preset, {}))
    values.update(overrides)
    return TrainConfig(**values)


# options that say where and how a run ran, not what it learned: no recipe states them
_NOT_RECIPE = {"run_dir", "run_name", "threads", "device", "data_dir", "log_every", "image_every",
               "checkpoint_every", "val_every", "eval_batch_size", "max_steps", "compile"}


def recipe_command(config: dict) -> str:
    """The train.py options that apply to the run and differ from the preset's, in the order of the config."""
    run = TrainConfig.from_dict(config)  # today's option names for a run saved under older ones
    config = run.applicable()  # a Show-Attend-Tell run has no glimpse sensor to state
    chosen = ("mode", "arch", "preset")
    base = resolve_config({k: config[k] for k in chosen if k in config}).to_dict()
    stated = {**family_options(run.family), "preset": config["preset"]}
    stated.update({key: value for key, value in config.items()
                   if key not in _NOT_RECIPE and key not in chosen and base.get(key) != value})
    return "python train.py " + " ".join(option_flags(stated))


def staged_recipe_command(stages: list[dict]) -> str:
    """The commands of a model trained in stages (``--init-from``; each stage as
    :func:`glimpse.checkpoint.training_stages` gives it, oldest first), joined by ``&&``: each stage
    but the last named by its run name, each stage after the first started from the one before it,
    so the line rebuilds the model even after a file an earlier stage started from has been replaced.
    A stage resumed with another ``--epochs`` (its ``budget_changes``) is its first budget capped at
    the step of the change, then each resume (a capped run resumes bit for bit)."""
    lines, previous = [], None
    for index, stage in enumerate(stages):
        config, changes = dict(stage["train_config"]), stage.get("budget_changes", [])
        if previous is not None:
            config["init_from"] = f"runs/{previous}/best.pt"
        name = previous = config.get("run_name")
        if changes and not name:
            raise ValueError(f"stage {index + 1} of {len(stages)} was resumed with another --epochs and has no run "
                             f"name to resume")
        if index < len(stages) - 1 and not name:
            raise ValueError(f"stage {index + 1} of {len(stages)} has no run name to start the next from")
        epochs = [change["epochs"] for change in changes] + [config["epochs"]]
        caps = [change["step"] for change in changes]
        line = recipe_command({**config, "epochs": epochs[0]})
        if index < len(stages) - 1 or changes:
            line += f" --run-name {name}"
        line += "".join(f" --max-steps {cap} && python train.py --resume runs/{name} --epochs {e}"
                        for cap, e in zip(caps, epochs[1:]))
        lines.append(line + (" --max-steps 0" if changes else ""))
    return " && ".join(lines)
