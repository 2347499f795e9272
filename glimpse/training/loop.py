"""The one training loop for hard and soft attention.

All randomness of step s comes from (seed, s): the digits of an epoch from a permutation
seeded by (seed, epoch), clutter, positions and location noise from (seed, s). So a run
resumed from a checkpoint takes exactly the steps the uninterrupted run would have taken.

Under ``torchrun --nproc_per_node=N`` (glimpse/training/distributed.py) every process computes
the same global minibatch and the same randomness and trains on its slice of it; gradients
are averaged across processes by DistributedDataParallel, so N processes take the steps of one
process with the same --batch-size (up to float summation order; batch norm normalises over the
global batch, which needs GPUs, so a model with it is refused in CPU processes). Metrics are
averaged across processes; only rank 0 validates, tests, writes TensorBoard and checkpoints.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from envs.data import MNISTSplits, load_mnist
from glimpse.checkpoint import CheckpointError, load_checkpoint, provenance, training_stages
from glimpse.benchmark import fixed_set
from glimpse.progress import progress
from glimpse.progress import say as progress_say
from glimpse.training import distributed
from glimpse.training.callbacks import (Checkpoints, CheckpointWriteError, DivergenceGuard, Pictures, ScalarLog,
                                        StopOnSignal, TrainingDiverged, Validation, accuracy, write_checkpoint)
from glimpse.training.config import TrainConfig
from glimpse.training.hard import HardAttentionLearner
from glimpse.models import Family
from glimpse.models.schedules import cosine
from glimpse.training.learner import Learner
from glimpse.training.rundir import RunDirectory
from glimpse.training.soft import BackpropLearner
from glimpse.training.state import RunState, StepResult
from glimpse.training.tensorboard import NullLogger, RunLogger
from glimpse.cpu import configure_cpu

__all__ = ["CheckpointWriteError", "TrainingDiverged", "TrainResult", "train", "training_step", "make_learner", "learner_class"]

N_PICTURES = 8
TRAINING_PHASES = ("data + forward", "backward", "optimizer")  # what training_step's ``mark`` is told
LEARNERS = {"hard": HardAttentionLearner, "soft": BackpropLearner, "full": BackpropLearner}  # by Family.mode


@dataclass
class TrainResult:
    run_dir: Path
    best_checkpoint: Path
    best_val_accuracy: float
    test_accuracy: float
    n_test: int
    steps: int
    train_seconds: float
    data_source: str


def step_seed(seed: int, step: int) -> int:
    return int(np.random.SeedSequence([seed, 1, step]).generate_state(1)[0])


def batch_indices(seed: int, step: int, n_train: int, batch_size: int) -> np.ndarray:
    """Training digits of ``step``: epochs are seeded permutations, the remainder is dropped."""
    steps_per_epoch = n_train // batch_size
    epoch, position = divmod(step, steps_per_epoch)
    return epoch_order(seed, epoch, n_train)[position * batch_size:(position + 1) * batch_size]


@functools.lru_cache(maxsize=2)
def epoch_order(seed: int, epoch: int, n_train: int) -> np.ndarray:
    """The seeded permutation of an epoch's training digits, made once per epoch (not once per step)."""
    return np.random.default_rng([seed, 0, epoch]).permutation(n_train)  # shared by the epoch's steps: read only


def learning_rate(config: TrainConfig, step: int, total_steps: int) -> float:
    """Linear warm-up over --warmup-steps, then a cosine from --lr to 0 over the run."""
    warmup = min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps > 0 else 1.0
    return config.lr * warmup * cosine(step / max(1, total_steps))


def training_step(learner: Learner, optimizer: torch.optim.Optimizer, config: TrainConfig, step: int,
                  n_train: int, schedule_steps: int, mark=lambda phase: None) -> StepResult:
    """The one training step (the loop's, and what the benchmarks and the report time): the
    learning rate and the learner's schedules at ``step``, the loss of the step's minibatch (all
    its randomness from the seed and the step), backward, clipping and Adam's step.
    ``mark(phase)`` is called as each of TRAINING_PHASES ends (the benchmarks' timer)."""
    lr = learning_rate(config, step, schedule_steps)
    for group in optimizer.param_groups:
        group["lr"] = lr
    scheduled = learner.schedule(step / schedule_steps)
    indices = batch_indices(config.seed, step, n_train, config.batch_size)
    loss, metrics = learner.loss(indices, step_seed(config.seed, step))
    mark("data + forward")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    mark("backward")
    if config.grad_clip > 0:
        metrics["train/grad_norm"] = torch.nn.utils.clip_grad_norm_(learner.model.parameters(), config.grad_clip)
    optimizer.step()
    mark("optimizer")
    return StepResult(loss, metrics, lr, scheduled, len(indices))


def train(config: TrainConfig, resume: str | Path | None = None, *, quiet: bool = False) -> TrainResult:
    """Train, validate every epoch, keep the best checkpoint, and score it on the test set. The
    step is :func:`training_step`; everything on a schedule hangs on it as a callback."""
    run, owner = start_run(config, resume, quiet)
    try:
        stop = StopOnSignal()
        callbacks = [DivergenceGuard(run), ScalarLog(), Pictures(), Validation(), Checkpoints(), stop]
        where = f"{distributed.world_size()} processes on {run.device.type}" if distributed.world_size() > 1 \
            else str(run.device)
        what = f"{config.mode} attention" if config.family.has_attention else "full-image baseline"
        run.say(f"[glimpse] {what} ({run.learner.family.name}), {run.data_source}, {where}; run {run.run_dir}")
        if run.start_step:
            run.say(f"[glimpse] resuming at step {run.start_step}/{run.total_steps}")
        run.learner.model.train()
        run.bar = progress(range(run.start_step, run.total_steps), initial=run.start_step, total=run.total_steps,
                           desc="train", unit="step", disable=quiet or not run.main)
        run.show(loss="-", acc="-", best_val=f"{run.best_val:.4f}" if run.best_val >= 0 else "-")
        run.started = time.perf_counter()
        try:
            with stop.installed(run):
                for step in run.bar:
                    result = training_step(run.learner, run.optimizer, config, step, run.n_train, run.schedule_steps)
                    run.stopping = run.stop_requested  # one answer for every callback of this step
                    for callback in callbacks:
                        callback.after_step(run, step + 1, result)
        except KeyboardInterrupt:
            run.bar.close()
            run.logger.close()
            run.say(f"\n[glimpse] interrupted; the last checkpoint is {run.run_dir / 'last.pt'}. "
                    f"Continue with: python train.py --resume {run.run_dir}")
            raise
        run.bar.close()
        run.elapsed = run.seconds()
        test_accuracy = score_best(run)
        run.logger.close()
        best_val, test_accuracy = distributed.broadcast_floats([run.best_val, test_accuracy], run.device)
        return TrainResult(run.run_dir, run.run_dir / "best.pt", best_val, test_accuracy, len(run.test_set.labels),
                           run.total_steps, run.elapsed, run.data_source)
    finally:
        run.learner.forward = run.learner.model  # drop the DDP wrapper: it holds the process group
        if owner is not None:
            owner.release()


def score_best(run: RunState) -> float:
    """Rank 0: the best checkpoint's accuracy on the fixed test canvases, written into it with the
    whole learning curve and the training time; 0.0 on the other processes."""
    if not run.main:
        return 0.0
    best = load_checkpoint(run.run_dir / "best.pt")
    run.learner.model.load_state_dict(best["model_state"])
    score = accuracy(run.learner, run.test_set.images, run.test_set.labels, run.config.eval_batch_size,
                     "test")
    run.logger.scalars({"test/accuracy": score}, run.total_steps)
    best.update(test_accuracy=score, train_seconds=run.elapsed, history=run.history)
    write_checkpoint(run.run_dir / "best.pt", {k: v for k, v in best.items() if k != "format"})
    return score


def start_run(config: TrainConfig, resume: str | Path | None, quiet: bool) -> tuple[RunState, RunDirectory | None]:
    """Everything before the first step: the checkpoint to resume or start from, the device and
    process group, the run directory (held against a second run), data, learner, optimiser, the
    schedule and the fixed canvases. A start that fails leaves no directory behind."""
    resumed = load_checkpoint(_last_checkpoint(resume)) if resume is not None else None
    # a resumed run's weights come from its own checkpoint
    initial, stages = initial_weights(config) if config.init_from and resumed is None else (None, [])
    if resumed is not None:
        stages = list(resumed.get("earlier_stages", []))
    configure_cpu(config.threads)
    device = distributed.resolve_device(config.device)
    if device.type == "cuda":  # cuDNN's fastest convolutions sum in a varying order: seeded runs would differ
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    distributed.init(device)
    rank, world = distributed.rank(), distributed.world_size()
    if config.batch_size % world:
        nearest = config.batch_size // world * world or world
        raise ValueError(f"--batch-size {config.batch_size} is the global batch and must be divisible by the "
                         f"number of processes ({world}): try --batch-size {nearest}")
    run_dir = new_run_directory(config) if resumed is None else _last_checkpoint(resume).parent
    owner = RunDirectory(run_dir).acquire() if rank == 0 else None  # rank 0 holds it for the group
    try:
        torch.manual_seed(config.seed)
        data = load_mnist(config.data_dir)
        trained_on = ((resumed or {}).get("provenance") or {}).get("data_sha256")
        if trained_on and trained_on != data.digest:  # another --data-dir may move the data, not change it
            raise ValueError(f"{_last_checkpoint(resume)} was trained on other digits (sha256 {trained_on[:16]}...) "
                             f"than {data.source} (sha256 {data.digest[:16]}...): give --data-dir the data it "
                             f"trained on")
        learner = make_learner(config, data, device, rank, world)
        if resumed is not None:
            check_same_model(learner, resumed, _last_checkpoint(resume))
        if initial is not None:  # a module the source lacks (RAM's context network) keeps its seeded start
            learner.model.load_state_dict({**learner.model.state_dict(), **initial})
        n_train = len(data.train)
        if n_train < config.batch_size:
            raise ValueError(f"--batch-size {config.batch_size} exceeds the {n_train} training digits")
        steps_per_epoch = n_train // config.batch_size
        schedule_steps = config.epochs * steps_per_epoch  # the schedule ignores --max-steps, a mere cap
        val_set, test_set = fixed_sets(learner.task, data)
        run = RunState(config, learner, make_optimizer(learner.model, config.lr), run_dir, device, rank == 0, n_train,
                       steps_per_epoch, schedule_steps, min(schedule_steps, config.max_steps or schedule_steps),
                       config.val_every or steps_per_epoch, val_set, test_set,
                       (val_set.images[:N_PICTURES], val_set.labels[:N_PICTURES]), data.source,
                       provenance(device, data.digest), stages)
        if resumed is not None:
            try:
                learner.model.load_state_dict(resumed["model_state"])
                run.optimizer.load_state_dict(optimizer_state_for(learner.model, resumed["model_state"],
                                                                  resumed["optimizer_state"]))
            except (RuntimeError, ValueError, KeyError, TypeError) as exc:
                said = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:300]
                raise CheckpointError(f"{_last_checkpoint(resume)}: its weights or optimiser state do not fit the "
                                      f"model its train_config builds ({said or type(exc).__name__})") from exc
            run.start_step, run.best_val, run.best_step = resumed["step"], resumed["best_val_accuracy"], resumed["best_step"]
            if run.start_step > run.total_steps:
                raise ValueError(f"--epochs {config.epochs} ends at step {run.total_steps} ({steps_per_epoch} an "
                                 f"epoch), and the run in {run_dir} is already at step {run.start_step}; nothing "
                                 f"to train (give more epochs, or leave --epochs out)")
            if run.start_step == run.total_steps and _tested(run_dir / "best.pt"):
                # (a run stopped between its last step and its test is resumed: it is tested then)
                more = "a larger --max-steps (or 0)" if config.max_steps == run.total_steps else "more --epochs"
                raise ValueError(f"the run in {run_dir} has finished (step {run.start_step} of {run.total_steps}, "
                                 f"tested); nothing to train (give {more} to train it further)")
            run.elapsed = resumed.get("train_seconds", 0.0)
            run.history = list(resumed.get("history", []))
            run.budget_changes = list(resumed.get("budget_changes", []))
            if resumed["train_config"]["epochs"] != config.epochs:  # the cosine's length changes from here on
                run.budget_changes.append({"step": run.start_step, "epochs": resumed["train_config"]["epochs"]})
        if world > 1:
            # DDP averages the gradients of the processes' equal-sized slices during backward: the
            # gradient of the global-batch mean. A hard family calls the model once per glimpse before
            # one backward; that is fine for DDP, because each parameter's gradient is accumulated (and
            # its reducer hook fires) once per backward however often the parameter was used, and
            # every parameter gets a gradient (REINFORCE trains the location net, its squared error
            # the baseline). The loop keeps stepping ``learner.model``: DDP shares its parameters.
            learner.model = distributed.synchronise_batch_norm(learner.model, device)
            learner.forward = torch.nn.parallel.DistributedDataParallel(
                learner.model, device_ids=[device] if device.type == "cuda" else None,
                find_unused_parameters=learner.family.leaves_parameters_unused(config))
        # events after the checkpoint's step are dropped (they are logged again); those at it are kept
        purge = run.start_step + 1 if run.start_step else 0
        run.logger = RunLogger(run_dir, config, data.source, purge_step=purge) if run.main else NullLogger()
        run.say = (lambda *a: None) if quiet or not run.main else progress_say
    except BaseException:
        if owner is not None:
            owner.discard_if_new()
        raise
    return run, owner


def new_run_directory(config: TrainConfig) -> Path:
    """--run-dir/--run-name (or a name made from the family, preset, seed and time); refuses a
    directory that already holds a run."""
    if Path(config.run_dir).exists() and not Path(config.run_dir).is_dir():
        raise ValueError(f"--run-dir {config.run_dir} is a file, not a directory")
    run_dir = Path(config.run_dir) / (config.run_name or default_run_name(config))
    if (run_dir / "last.pt").exists():
        raise FileExistsError(f"{run_dir} already holds a run: continue it with --resume {run_dir}, "
                              f"or choose another --run-name")
    if (run_dir / "best.pt").exists():  # a kept model without its last.pt: a new run would overwrite it
        raise FileExistsError(f"{run_dir} already holds a model (best.pt) and no last.pt to resume: move or delete "
                              f"it, or choose another --run-name")
    return run_dir


def make_learner(config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1) -> Learner:
    """The learner for the family's way of learning, its model on ``device``; with ``world_size``
    > 1 it trains on slice ``rank`` of each global minibatch."""
    return learner_class(config.family)(config, data, device, rank, world_size)


def learner_class(family: Family) -> type:
    """The learner class that trains ``family`` (by its mode): what the report asks how a model
    learns where to look (its ``attention_gradient``)."""
    return LEARNERS[family.mode]


def initial_weights(config: TrainConfig) -> tuple[dict[str, torch.Tensor], list[dict]]:
    """The weights of checkpoint ``config.init_from`` (--init-from), checked against the model this
    run builds: the same family, parameters of the same names and shapes; the task it was trained
    on may differ (the same RAM reads one digit or a sequence of them), and modules the family may
    add (its ``added_modules``) keep this model's initialisation. ValueError when it does not fit.
    Also the checkpoint's :func:`~glimpse.checkpoint.training_stages`. Cheap (no data), so a run can refuse it before it
    loads data or makes its directory."""
    path, family = config.init_from, config.family
    source = load_checkpoint(path)
    if source["kind"] != family.name:
        raise ValueError(f"--init-from {path} holds a {source['kind']} model; this run trains {family.name}")
    model = family.build(family.model_config(config))
    own, theirs = model.state_dict(), source["model_state"]
    # a module the source lacks but the family may add (RAM's context network) is left to the run's
    # own seeded model: this one is built before the seed is set
    added = {name for name in own if name not in theirs and name.split(".")[0] in family.added_modules}
    reshaped = {name for name in own.keys() & theirs.keys() if own[name].shape != theirs[name].shape}
    # loaded as a run loads them, so that what the model drops on load (an old checkpoint's dead
    # parameter: Show-Attend-Tell's score bias) is no misfit
    loaded = model.load_state_dict({k: v for k, v in theirs.items() if k not in reshaped}, strict=False)
    misfit = sorted({*reshaped, *loaded.unexpected_keys, *(name for name in loaded.missing_keys if name not in added)})
    if misfit:
        shown = ", ".join(f"{name} {_shape(theirs, name)} there, {_shape(own, name)} here" for name in misfit[:3])
        raise ValueError(f"--init-from {path}: its weights do not fit this model ({shown}"
                         f"{', ...' if len(misfit) > 3 else ''}); give the options it was trained with "
                         f"(sizes, --core, --glimpse-net, --n-scales, ...)")
    return theirs, training_stages(source)


def _tested(best: Path) -> bool:
    """Whether the run's best.pt holds its test accuracy: the run finished."""
    try:
        return best.is_file() and "test_accuracy" in load_checkpoint(best)
    except CheckpointError:
        return False


def _shape(state: dict, name: str) -> str:
    return str(tuple(state[name].shape)) if name in state else "missing"


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Adam:
    """Adam over ``model``'s parameters. The fused kernel (one pass over all parameters, CPU and
    CUDA) takes a quarter of the per-tensor loop's time on RAM's many small tensors; same update rule."""
    fused = all(p.device.type in ("cpu", "cuda") for p in model.parameters())
    return torch.optim.Adam(model.parameters(), lr=lr, fused=fused)


def optimizer_state_for(model: torch.nn.Module, saved_model: dict, saved_optimizer: dict) -> dict:
    """The optimiser state saved beside ``saved_model``, without the entries of parameters ``model`` no
    longer has (a parameter dropped from a family, its old weights discarded on load: Show-Attend-Tell's
    score bias). Adam keys its state by parameter position, in the model's order, which a state dict
    keeps (buffers aside). Unchanged when nothing was dropped or the layouts disagree otherwise (then
    ``load_state_dict`` refuses a different number of parameters, and matches an equal number by
    position, as it always does)."""
    buffers = {name for name, _ in model.named_buffers()}
    saved = [name for name in saved_model if name not in buffers]
    current = [name for name, _ in model.named_parameters()]
    kept = [position for position, name in enumerate(saved) if name in set(current)]
    groups = saved_optimizer.get("param_groups", [])
    if saved == current or [saved[i] for i in kept] != current or len(groups) != 1 \
            or list(groups[0]["params"]) != list(range(len(saved))):
        return saved_optimizer
    state = saved_optimizer.get("state", {})
    return {"state": {new: state[old] for new, old in enumerate(kept) if old in state},
            "param_groups": [{**groups[0], "params": list(range(len(kept)))}]}


def fixed_sets(task: dict, data: MNISTSplits):
    """Fixed canvases: every run is selected and scored on the same images."""
    return fixed_set(task, data.val, "val")[0], fixed_set(task, data.test, "test")[0]


def default_run_name(config: TrainConfig) -> str:
    return f"{config.family.run_label(config)}-{config.preset}-seed{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_same_model(learner: Learner, resumed: dict, path: Path) -> None:
    """CheckpointError when this version builds the resumed run another model than it trained (a
    field a family gained since, at a new default): the run would change its training midway."""
    family = learner.family
    changed = family.config_changes(resumed["model_config"], learner.model_config)
    if changed:
        said = ", ".join(f"{name}={was!r} (now {now!r})" for name, (was, now) in changed.items())
        raise CheckpointError(f"{path}: it was trained as a {family.name} model with {said}; this version would "
                              f"resume it as another model. Finish it with the version it was started with, or "
                              f"start a new run (--init-from {path})")


def _last_checkpoint(resume: str | Path) -> Path:
    path = Path(resume)
    return path / "last.pt" if path.is_dir() else path
