"""What the training loop and its callbacks share: the state of one run, and what a step returns."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from envs.task import BENCHMARK_VERSION
from glimpse.training.config import TrainConfig
from glimpse.training.learner import Learner


@dataclass
class StepResult:
    """One training step: its ``loss`` (on the device), detached ``metrics``, the learning rate,
    the ``scheduled`` values the learner set (TensorBoard names) and the ``images`` it trained on."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]
    lr: float
    scheduled: dict[str, float]
    images: int


@dataclass
class RunState:
    """One run: its configuration, learner and optimiser, schedule, where it writes, the fixed
    validation canvases, and what it has found so far (the learning curve, the best validation)."""

    config: TrainConfig
    learner: Learner
    optimizer: torch.optim.Optimizer
    run_dir: Path
    device: torch.device
    main: bool  # rank 0: validates, logs and writes
    n_train: int  # training digits
    steps_per_epoch: int
    schedule_steps: int  # the steps of the cosine schedule (--epochs); --max-steps only caps the run
    total_steps: int
    val_every: int
    val_set: object
    test_set: object
    picture_canvases: tuple
    data_source: str
    origin: dict  # provenance: machine, device, digits
    stages: list = field(default_factory=list)  # the runs this one started from (--init-from)
    budget_changes: list = field(default_factory=list)  # {step, epochs before} of each resume that changed --epochs
    logger: object = None
    say: object = print
    bar: object = None
    start_step: int = 0
    best_val: float = -1.0
    best_step: int = -1
    elapsed: float = 0.0  # training seconds before this process started (a resumed run's)
    history: list = field(default_factory=list)  # one entry per validation, kept in the checkpoints
    started: float = field(default_factory=time.perf_counter)
    postfix: dict = field(default_factory=dict)
    aside: float = 0.0  # seconds this process spent beside the steps (validation, pictures, checkpoints)
    stop_requested: bool = False  # a signal asked the run to stop (set by a signal handler, at any moment)
    stopping: bool = False  # the request as the loop took it before this step's callbacks: the run stops after them

    def is_log_step(self, done: int) -> bool:
        return done % self.config.log_every == 0 or done == self.total_steps

    def is_validation_step(self, done: int) -> bool:
        return done % self.val_every == 0 or done == self.total_steps

    def is_checkpoint_step(self, done: int) -> bool:
        """A step after which last.pt is written (every --checkpoint-every steps, at validations, and
        the step the run stops after)."""
        return done % self.config.checkpoint_every == 0 or self.is_validation_step(done) or self.stopping

    def seconds(self) -> float:
        """Training seconds so far, earlier sessions of a resumed run included."""
        return self.elapsed + (time.perf_counter() - self.started)

    @contextmanager
    def set_aside(self):
        """Time spent in the block is not training: images per second leave it out."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.aside += time.perf_counter() - start

    def show(self, **values: str) -> None:
        """Update the progress bar's postfix (loss, accuracy, best validation)."""
        self.postfix.update(values)
        if self.bar is not None:
            self.bar.set_postfix(**self.postfix)

    def payload(self, step: int, with_optimizer: bool) -> dict:
        """A checkpoint: the config that rebuilds the model, its weights, the run's progress and,
        for last.pt, the optimiser's state (what an exact resume needs)."""
        learner = self.learner
        out = dict(kind=learner.family.name, model_config=learner.model_config, task=learner.task,
                   train_config=self.config.to_dict(), model_state=learner.model.state_dict(), step=step,
                   best_val_accuracy=self.best_val, best_step=self.best_step, data_source=self.data_source,
                   run_dir=str(self.run_dir.resolve()), provenance=self.origin, benchmark=BENCHMARK_VERSION,
                   train_seconds=self.seconds(), history=self.history)
        if self.stages:
            out["earlier_stages"] = self.stages
        if self.budget_changes:
            out["budget_changes"] = self.budget_changes
        if with_optimizer:
            out["optimizer_state"] = self.optimizer.state_dict()
        return out
