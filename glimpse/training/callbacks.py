"""What hangs on the training loop, as callbacks (Stable-Baselines3's habit): each is called after
every step with the run's state and decides for itself whether its time has come.

The loop (glimpse/training/loop.py) keeps only the order of things; these keep the schedules:
a check that the loss stayed finite, scalar logs, pictures, validation with the best and last
checkpoints, periodic checkpoints. Under torchrun every process calls every callback (logging and
the divergence check average over processes); rank 0 alone validates and writes.
"""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

import numpy as np
import torch

from glimpse.checkpoint import save_checkpoint
from glimpse.inference import predict_probabilities, read_right
from glimpse.finding import DEFAULT_RADIUS, attention_centres, finding_summary, reading_summary
from glimpse.progress import progress
from glimpse.training import distributed
from glimpse.training.learner import Learner, pictures
from glimpse.training.state import RunState, StepResult


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk, say); the previous one is intact."""


def write_checkpoint(path, payload: dict) -> None:
    """:func:`save_checkpoint`, with a failure to write turned into a stop that says what is left."""
    try:
        save_checkpoint(path, payload)
    except OSError as exc:
        kept = f"the previous {path.name} is intact" if path.exists() else f"no {path.name} was written"
        raise CheckpointWriteError(f"could not write {path} ({exc.strerror or exc}); {kept}") from exc


class Callback:
    """Called after each training step (``done`` steps taken in all); the last step's call ends the run."""

    def after_step(self, run: RunState, done: int, result: StepResult) -> None:
        pass


class DivergenceGuard(Callback):
    """Stops the run when the loss, the clipped gradient's norm or, on a checkpoint step, a weight
    became NaN or infinite (a finite loss can still take a NaN gradient into every weight). They are
    checked on the device and read on the host only when logging or writing a checkpoint, so that a
    step never waits for the device and a diverged model never overwrites last.pt."""

    def __init__(self, run: RunState):
        self.finite = torch.ones((), dtype=torch.bool, device=run.device)
        self.checked_until = run.start_step

    def after_step(self, run, done, result):
        self.finite = self.finite & torch.isfinite(result.loss.detach())
        if "train/grad_norm" in result.metrics:
            self.finite = self.finite & torch.isfinite(result.metrics["train/grad_norm"])
        if not (run.is_log_step(done) or run.is_checkpoint_step(done)):
            return
        if run.is_checkpoint_step(done):  # without clipping, the gradient's norm is not computed
            self.finite = self.finite & torch.stack([torch.isfinite(p).all() for p in run.learner.model.parameters()]).all()
        if not bool(distributed.all_reduce_mean(self.finite.to(torch.float32)).item() == 1.0):  # every process
            last = run.run_dir / "last.pt"
            raise TrainingDiverged(
                f"the loss or the weights became nan or inf at a step between {self.checked_until} and {done - 1} (epoch "
                f"{done / run.steps_per_epoch:.2f}); stopping. "
                + (f"The last good checkpoint is {last}" if last.exists() else "No checkpoint was written yet")
                + ": try a lower --lr or --grad-clip.")
        self.checked_until = done


class ScalarLog(Callback):
    """Every --log-every steps: the step's metrics (averaged over processes), the schedules, the
    learning rate, the epoch and images per second since the last log (training only: the time
    other callbacks set aside is left out); the progress bar's postfix."""

    def __init__(self):
        self.window_start, self.window_images, self.window_aside = time.perf_counter(), 0, 0.0

    def after_step(self, run, done, result):
        self.window_images += result.images
        if not run.is_log_step(done):
            return
        now = time.perf_counter()
        scalars = mean_over_processes(result.metrics, run.device)
        scalars.update({**result.scheduled, "train/learning_rate": result.lr, "train/epoch": done / run.steps_per_epoch,
                        "perf/images_per_second": self.window_images / (now - self.window_start
                                                                         - (run.aside - self.window_aside))})
        run.logger.scalars(scalars, done)
        run.show(loss=f"{scalars['losses/total']:.3f}", acc=f"{scalars['train/accuracy']:.3f}")
        self.window_start, self.window_images, self.window_aside = now, 0, run.aside


class Pictures(Callback):
    """Every --image-every steps (rank 0): where the model looks on the fixed picture canvases.
    A validation step draws them itself (:class:`Validation`), so they are drawn once there."""

    def after_step(self, run, done, result):
        if run.main and run.config.image_every and done % run.config.image_every == 0 \
                and not run.is_validation_step(done):
            with run.set_aside():
                run.logger.images(pictures(run.learner, *run.picture_canvases, len(run.val_set.images)), done)


class Validation(Callback):
    """Every --val-every steps and at the end (rank 0; the others wait): validation scalars, the
    learning curve, the pictures, best.pt when the accuracy improved, and last.pt."""

    def after_step(self, run, done, result):
        if not run.is_validation_step(done):
            return
        with run.set_aside():
            self.validate(run, done)

    def validate(self, run, done):
        if run.main:
            scalars = validate(run.learner, run.val_set, run.config.eval_batch_size)
            accuracy = scalars["val/accuracy"]
            run.logger.scalars({**scalars, "val/error": 1 - accuracy}, done)
            run.history.append({"step": done, "epoch": done / run.steps_per_epoch, "val_accuracy": accuracy,
                                "train_seconds": run.seconds()})
            run.logger.images(pictures(run.learner, *run.picture_canvases, len(run.val_set.images)), done)
            if accuracy > run.best_val:
                run.best_val, run.best_step = accuracy, done
                write_checkpoint(run.run_dir / "best.pt", run.payload(done, with_optimizer=False))
            run.show(best_val=f"{run.best_val:.4f}")
            run.logger.flush()
            write_checkpoint(run.run_dir / "last.pt", run.payload(done, with_optimizer=True))
            run.say(f"[glimpse] step {done} epoch {done / run.steps_per_epoch:.2f}: val accuracy {accuracy:.4f} "
                    f"(best {run.best_val:.4f} at step {run.best_step})")
        distributed.barrier()


class Checkpoints(Callback):
    """Every --checkpoint-every steps that is not a validation step (which writes it too): last.pt."""

    def after_step(self, run, done, result):
        if run.main and run.is_checkpoint_step(done) and not run.is_validation_step(done):
            with run.set_aside():
                run.logger.flush()
                write_checkpoint(run.run_dir / "last.pt", run.payload(done, with_optimizer=True))


class StopOnSignal(Callback):
    """SIGTERM (``kill``, a scheduler's preemption) or SIGINT (Ctrl-C, ``kill -INT``) asks the run to
    stop: the loop takes the request before a step's callbacks (``run.stopping``), so that step is a
    checkpoint step for all of them (the weights checked, then last.pt written: no step is lost) and
    the run stops as interrupted after it; a request that comes during the callbacks waits for the
    next step. A second signal stops the run at once. The handler only sets a flag (printing from a
    signal handler can re-enter a write under way). A single process only: under torchrun every
    process would have to stop at one step."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signal_name = None

    @contextmanager
    def installed(self, run: RunState):
        if distributed.world_size() > 1 or threading.current_thread() is not threading.main_thread():
            yield
            return

        def ask(signum, _frame):
            if run.stop_requested:
                raise KeyboardInterrupt
            run.stop_requested, self.signal_name = True, signal.Signals(signum).name
        previous = {s: signal.signal(s, ask) for s in self.SIGNALS}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def after_step(self, run, done, result):
        if run.stopping:  # the callbacks before this one took the step as a checkpoint step
            run.say(f"\n[glimpse] {self.signal_name}: stopped after step {done}, with its checkpoint")
            raise KeyboardInterrupt


def mean_over_processes(metrics: dict[str, torch.Tensor], device: torch.device) -> dict[str, float]:
    """Scalar metrics averaged over the processes (each over an equal slice of the batch): the
    global-batch value for means; for train/advantage_variance the mean of per-slice variances."""
    values = torch.stack([torch.as_tensor(v).detach().to(device, torch.float32).reshape(()) for v in metrics.values()])
    return dict(zip(metrics, distributed.all_reduce_mean(values).tolist()))


# ------------------------------------------------------------------------- scoring the fixed sets

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
    the median distance at the last step (see glimpse/finding.py). One pass serves both.
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
    found = finding_summary(centres, canvases.digit_xy, predictions, canvases.labels, DEFAULT_RADIUS)
    return {"val/accuracy": float((predictions == canvases.labels).mean()),
            "val/digit_found": found["found"],
            "val/distance_to_digit": found["median_distance_per_step"][-1]}
