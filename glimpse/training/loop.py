"""The one training loop for hard and soft attention.

All randomness of step s comes from (seed, s): the digits of an epoch from a permutation
seeded by (seed, epoch), clutter, positions and location noise from (seed, s). So a run
resumed from a checkpoint takes exactly the steps the uninterrupted run would have taken.

Under ``torchrun --nproc_per_node=N`` (glimpse/training/distributed.py) every process computes
the same global minibatch and the same randomness and trains on its slice of it; gradients
are averaged across processes by DistributedDataParallel, so N processes take the steps of one
process with the same --batch-size (up to float summation order). Metrics are averaged across
processes; only rank 0 validates, tests, writes TensorBoard and checkpoints.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from envs.data import MNISTSplits, load_mnist
from glimpse.checkpoint import load_checkpoint, provenance, save_checkpoint, training_stages
from envs.task import BENCHMARK_VERSION
from glimpse.evaluation import fixed_set
from glimpse.progress import progress
from glimpse.progress import say as progress_say
from glimpse.inference import predict_probabilities, read_right
from glimpse.localisation import DEFAULT_RADIUS, attention_centres, localisation_summary, reading_summary
from glimpse.training import distributed
from glimpse.training.config import TrainConfig
from glimpse.training.hard import HardAttentionLearner
from glimpse.training.learner import Learner, cosine, pictures
from glimpse.training.rundir import RunDirectory
from glimpse.training.soft import BackpropLearner
from glimpse.training.tensorboard import NullLogger, RunLogger

N_PICTURES = 8
LEARNERS = {"hard": HardAttentionLearner, "soft": BackpropLearner, "full": BackpropLearner}  # by Family.mode


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk, say); the previous one is intact."""


def write_checkpoint(path: Path, payload: dict) -> None:
    """:func:`save_checkpoint`, with a failure to write turned into a stop that says what is left."""
    try:
        save_checkpoint(path, payload)
    except OSError as exc:
        kept = f"the previous {path.name} is intact" if path.exists() else f"no {path.name} was written"
        raise CheckpointWriteError(f"could not write {path} ({exc.strerror or exc}); {kept}") from exc


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
    order = np.random.default_rng([seed, 0, epoch]).permutation(n_train)
    return order[position * batch_size:(position + 1) * batch_size]


def learning_rate(config: TrainConfig, step: int, total_steps: int) -> float:
    """Linear warm-up over --warmup-steps, then a cosine from --lr to 0 over the run."""
    warmup = min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps > 0 else 1.0
    return config.lr * warmup * cosine(step / max(1, total_steps))


def make_learner(config: TrainConfig, data: MNISTSplits, device: torch.device | str = "cpu",
                 rank: int = 0, world_size: int = 1) -> Learner:
    """The learner for the family's way of learning, its model on ``device``; with ``world_size``
    > 1 it trains on slice ``rank`` of each global minibatch."""
    return LEARNERS[config.family.mode](config, data, device, rank, world_size)


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
    own = family.build(family.model_config(config)).state_dict()
    theirs = source["model_state"]
    # a module the source lacks but the family may add (RAM's context network) starts as built
    added = {name: value for name, value in own.items()
             if name not in theirs and name.split(".")[0] in family.added_modules}
    misfit = sorted(name for name in own.keys() | theirs.keys()
                    if name not in added and (name not in own or name not in theirs or own[name].shape != theirs[name].shape))
    if misfit:
        shown = ", ".join(f"{name} {_shape(theirs, name)} there, {_shape(own, name)} here" for name in misfit[:3])
        raise ValueError(f"--init-from {path}: its weights do not fit this model ({shown}"
                         f"{', ...' if len(misfit) > 3 else ''}); give the options it was trained with "
                         f"(sizes, --core, --glimpse-net, --n-scales, ...)")
    return {**theirs, **added}, training_stages(source)


def _shape(state: dict, name: str) -> str:
    return str(tuple(state[name].shape)) if name in state else "missing"


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Adam:
    """Adam over ``model``'s parameters. The fused kernel (one pass over all parameters, CPU and
    CUDA) takes a quarter of the per-tensor loop's time on RAM's many small tensors; same update rule."""
    fused = all(p.device.type in ("cpu", "cuda") for p in model.parameters())
    return torch.optim.Adam(model.parameters(), lr=lr, fused=fused)


def predict(learner: Learner, images: np.ndarray, batch_size: int, desc: str) -> np.ndarray:
    """Predicted digits (N,) or (N, K)."""
    with progress(total=len(images), desc=desc, leave=False, unit="img") as bar:
        probs = predict_probabilities(learner.family.name, learner.model, learner.task, images, batch_size,
                                      progress=bar)
    learner.model.train()
    return probs.argmax(-1).numpy()


def accuracy(learner: Learner, images: np.ndarray, labels: np.ndarray, batch_size: int, desc: str) -> float:
    """The share of canvases read right (every digit of a multi-digit canvas)."""
    return float(read_right(predict(learner, images, batch_size, desc), labels).mean())


def validate(learner: Learner, canvases, batch_size: int) -> dict[str, float]:
    """Validation accuracy and, for the attention models, whether they looked at the digit:
    the share of canvases where some step came within DEFAULT_RADIUS pixels of its centre, and
    the median distance at the last step (see glimpse/localisation.py). One pass serves both.
    Multi-digit canvases report the share of digits read right and, for the attention models, the
    share of digits whose steps looked at them and of answers that are another digit's label."""
    multi = canvases.labels.ndim == 2
    if not learner.family.has_attention:
        predictions = predict(learner, canvases.images, batch_size, "validate")
        scalars = {"val/accuracy": float(read_right(predictions, canvases.labels).mean())}
        if multi:
            scalars["val/digit_accuracy"] = float((predictions == canvases.labels).mean())
        return scalars
    with progress(total=len(canvases.images), desc="validate", leave=False, unit="img") as bar:
        centres, predictions = attention_centres(learner.family.name, learner.model, learner.task, canvases.images,
                                                 batch_size, progress=bar)
    learner.model.train()
    if multi:
        reading = reading_summary(centres, canvases.digit_xy, predictions, canvases.labels, DEFAULT_RADIUS)
        return {"val/accuracy": 1 - reading["error"],
                "val/digit_accuracy": float((predictions == canvases.labels).mean()),
                "val/digit_found": float(np.mean(reading["found"])),
                "val/answered_another_digit": float(np.mean(reading["answered_another_digit"]))}
    found = localisation_summary(centres, canvases.digit_xy, predictions, canvases.labels, DEFAULT_RADIUS)
    return {"val/accuracy": float((predictions == canvases.labels).mean()),
            "val/digit_found": found["found"],
            "val/distance_to_digit": found["median_distance_per_step"][-1]}


def fixed_sets(task: dict, data: MNISTSplits):
    """Fixed canvases: every run is selected and scored on the same images."""
    return fixed_set(task, data.val, "val")[0], fixed_set(task, data.test, "test")[0]


def default_run_name(config: TrainConfig) -> str:
    return f"{config.model_kind}-{config.preset}-seed{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def train(config: TrainConfig, resume: str | Path | None = None, *, quiet: bool = False) -> TrainResult:
    """Train, validate every epoch, keep the best checkpoint, and score it on the test set."""
    resumed = load_checkpoint(_last_checkpoint(resume)) if resume is not None else None
    # a resumed run's weights come from its own checkpoint
    initial, stages = initial_weights(config) if config.init_from and resumed is None else (None, [])
    if resumed is not None:
        stages = list(resumed.get("earlier_stages", []))
    if config.threads:
        torch.set_num_threads(config.threads)
    device = distributed.resolve_device(config.device)
    if device.type == "cuda":  # cuDNN's fastest convolutions sum in a varying order: seeded runs would differ
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    distributed.init(device)
    rank, world = distributed.rank(), distributed.world_size()
    main = rank == 0
    if config.batch_size % world:
        nearest = config.batch_size // world * world or world
        raise ValueError(f"--batch-size {config.batch_size} is the global batch and must be divisible by the "
                         f"number of processes ({world}): try --batch-size {nearest}")
    if resumed is not None:  # the directory given, wherever the run has moved since
        run_dir = _last_checkpoint(resume).parent
    else:
        if Path(config.run_dir).exists() and not Path(config.run_dir).is_dir():
            raise ValueError(f"--run-dir {config.run_dir} is a file, not a directory")
        run_dir = Path(config.run_dir) / (config.run_name or default_run_name(config))
        if (run_dir / "last.pt").exists():
            raise FileExistsError(f"{run_dir} already holds a run: continue it with --resume {run_dir}, "
                                  f"or choose another --run-name")
    owner = RunDirectory(run_dir).acquire() if main else None  # rank 0 holds it for the group
    try:  # a start that fails before training leaves no directory behind
        torch.manual_seed(config.seed)
        data = load_mnist(config.data_dir)
        learner = make_learner(config, data, device, rank, world)
        if initial is not None:
            learner.model.load_state_dict(initial)
        optimizer = make_optimizer(learner.model, config.lr)
        n_train = len(data.train)
        if n_train < config.batch_size:
            raise ValueError(f"--batch-size {config.batch_size} exceeds the {n_train} training digits")
        steps_per_epoch = n_train // config.batch_size
        schedule_steps = config.epochs * steps_per_epoch  # the schedule ignores --max-steps, a mere cap
        total_steps = min(schedule_steps, config.max_steps) if config.max_steps else schedule_steps
        val_every = config.val_every or steps_per_epoch
        val_set, test_set = fixed_sets(learner.task, data)
        picture_canvases = (val_set.images[:N_PICTURES], val_set.labels[:N_PICTURES])

        start_step, best_val, best_step, elapsed = 0, -1.0, -1, 0.0
        history: list[dict] = []  # one entry per validation: the learning curve, kept in the checkpoints
        if resumed is not None:
            learner.model.load_state_dict(resumed["model_state"])
            optimizer.load_state_dict(resumed["optimizer_state"])
            start_step, best_val, best_step = resumed["step"], resumed["best_val_accuracy"], resumed["best_step"]
            elapsed = resumed.get("train_seconds", 0.0)
            history = list(resumed.get("history", []))
        if world > 1:
            # DDP averages the gradients of the processes' equal-sized slices during backward: the
            # gradient of the global-batch mean. RAM calls the model once per glimpse before one
            # backward; that is fine for DDP, because each parameter's gradient is accumulated (and
            # its reducer hook fires) once per backward however often the parameter was used, and
            # every parameter gets a gradient (REINFORCE trains the location net, its squared error
            # the baseline). The loop keeps stepping ``learner.model``: DDP shares its parameters.
            learner.forward = torch.nn.parallel.DistributedDataParallel(
                learner.model, device_ids=[device] if device.type == "cuda" else None,
                # random glimpses leave the policy unused; a one-glimpse episode the core's recurrent weights
                find_unused_parameters=config.random_glimpses or config.n_glimpses * config.n_digits == 1)

    except BaseException:
        if owner is not None:
            owner.discard_if_new()
        raise
    try:
        origin = provenance(device, data.digest)

        def payload(step: int, with_optimizer: bool) -> dict:
            out = dict(kind=learner.family.name, model_config=learner.model_config, task=learner.task,
                       train_config=config.to_dict(), model_state=learner.model.state_dict(), step=step,
                       best_val_accuracy=best_val, best_step=best_step, data_source=data.source,
                       run_dir=str(run_dir.resolve()), provenance=origin, benchmark=BENCHMARK_VERSION,
                       train_seconds=elapsed + (time.perf_counter() - t_start), history=history)
            if stages:
                out["earlier_stages"] = stages
            if with_optimizer:
                out["optimizer_state"] = optimizer.state_dict()
            return out

        logger = RunLogger(run_dir, config, data.source, purge_step=start_step) if main else NullLogger()
        say = (lambda *a: None) if quiet or not main else progress_say
        where = f"{world} processes on {device.type}" if world > 1 else str(device)
        what = "full-image baseline" if config.mode == "full" else f"{config.mode} attention"
        say(f"[glimpse] {what} ({learner.family.name}), {data.source}, {where}; run {run_dir}")
        if resumed is not None:
            say(f"[glimpse] resuming at step {start_step}/{total_steps}")
        learner.model.train()
        t_start = time.perf_counter()
        window_start, window_images = time.perf_counter(), 0
        step = start_step
        bar = progress(range(start_step, total_steps), initial=start_step, total=total_steps, desc="train",
                       unit="step", disable=quiet or not main)
        # one postfix for the bar: training loss and accuracy at each log, best validation at each validation
        postfix = {"loss": "-", "acc": "-", "best_val": f"{best_val:.4f}" if best_val >= 0 else "-"}
        finite, checked_until = torch.ones((), dtype=torch.bool, device=device), start_step
        try:
            for step in bar:
                lr = learning_rate(config, step, schedule_steps)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                scheduled = learner.schedule(step / schedule_steps)
                indices = batch_indices(config.seed, step, n_train, config.batch_size)
                loss, metrics = learner.loss(indices, step_seed(config.seed, step))
                # read on the host only when logging or checkpointing, so that a step never waits for the device
                finite = finite & torch.isfinite(loss.detach())
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip > 0:
                    metrics["train/grad_norm"] = torch.nn.utils.clip_grad_norm_(learner.model.parameters(), config.grad_clip)
                optimizer.step()
                window_images += len(indices)
                done = step + 1
                if done % config.log_every == 0 or done % val_every == 0 or done == total_steps:
                    if not _finite_everywhere(finite):
                        raise TrainingDiverged(
                            f"loss became nan or inf at a step between {checked_until} and {done - 1} (epoch "
                            f"{done / steps_per_epoch:.2f}); stopping. "
                            + (f"The last good checkpoint is {run_dir / 'last.pt'}" if (run_dir / "last.pt").exists()
                               else "No checkpoint was written yet") + ": try a lower --lr or --grad-clip.")
                    checked_until = done
                if done % config.log_every == 0 or done == total_steps:
                    now = time.perf_counter()
                    scalars = _mean_over_processes(metrics, device)
                    scalars.update({**scheduled, "train/learning_rate": lr, "train/epoch": done / steps_per_epoch,
                                    "perf/images_per_second": window_images / (now - window_start)})
                    logger.scalars(scalars, done)
                    postfix.update(loss=f"{scalars['losses/total']:.3f}", acc=f"{scalars['train/accuracy']:.3f}")
                    bar.set_postfix(**postfix)
                    window_start, window_images = now, 0
                if main and config.image_every and done % config.image_every == 0:
                    logger.images(pictures(learner, *picture_canvases), done)
                if done % val_every == 0 or done == total_steps:
                    if not main:  # rank 0 validates and checkpoints; the others wait for it
                        distributed.barrier()
                        continue
                    val_scalars = validate(learner, val_set, config.eval_batch_size)
                    val_acc = val_scalars["val/accuracy"]
                    logger.scalars({**val_scalars, "val/error": 1 - val_acc}, done)
                    history.append({"step": done, "epoch": done / steps_per_epoch, "val_accuracy": val_acc,
                                    "train_seconds": elapsed + (time.perf_counter() - t_start)})
                    logger.images(pictures(learner, *picture_canvases), done)
                    if val_acc > best_val:
                        best_val, best_step = val_acc, done
                        write_checkpoint(run_dir / "best.pt", payload(done, with_optimizer=False))
                    postfix["best_val"] = f"{best_val:.4f}"
                    bar.set_postfix(**postfix)
                    write_checkpoint(run_dir / "last.pt", payload(done, with_optimizer=True))
                    say(f"[glimpse] step {done} epoch {done / steps_per_epoch:.2f}: val accuracy {val_acc:.4f} "
                        f"(best {best_val:.4f} at step {best_step})")
                    distributed.barrier()
                elif main and done % config.checkpoint_every == 0:
                    write_checkpoint(run_dir / "last.pt", payload(done, with_optimizer=True))
        except KeyboardInterrupt:
            bar.close()
            logger.close()
            say(f"\n[glimpse] interrupted; the last checkpoint is {run_dir / 'last.pt'}. "
                f"Continue with: python train.py --resume {run_dir}")
            raise
        bar.close()
        elapsed += time.perf_counter() - t_start

        test_acc = 0.0
        if main:
            best = load_checkpoint(run_dir / "best.pt")
            learner.model.load_state_dict(best["model_state"])
            test_acc = accuracy(learner, test_set.images, test_set.labels, config.eval_batch_size, "test")
            logger.scalars({"test/accuracy": test_acc}, total_steps)
            best["test_accuracy"] = test_acc
            best["train_seconds"] = elapsed
            best["history"] = history  # the whole learning curve, not only up to the best step
            write_checkpoint(run_dir / "best.pt", {k: v for k, v in best.items() if k != "format"})
        logger.close()
        best_val, test_acc = distributed.broadcast_floats([best_val, test_acc], device)
        return TrainResult(run_dir, run_dir / "best.pt", best_val, test_acc, len(test_set.labels), total_steps, elapsed,
                           data.source)
    finally:
        learner.forward = learner.model  # drop the DDP wrapper: it holds the process group
        if owner is not None:
            owner.release()


def _finite_everywhere(finite: torch.Tensor) -> bool:
    """Whether every loss since the last check was finite on every process (so that all of them stop together)."""
    return bool(distributed.all_reduce_mean(finite.to(torch.float32)).item() == 1.0)


def _mean_over_processes(metrics: dict[str, torch.Tensor], device: torch.device) -> dict[str, float]:
    """Scalar metrics averaged over the processes (each over an equal slice of the batch): the
    global-batch value for means; for train/advantage_variance the mean of per-slice variances."""
    values = torch.stack([torch.as_tensor(v).detach().to(device, torch.float32).reshape(()) for v in metrics.values()])
    return dict(zip(metrics, distributed.all_reduce_mean(values).tolist()))


def _last_checkpoint(resume: str | Path) -> Path:
    path = Path(resume)
    return path / "last.pt" if path.is_dir() else path
