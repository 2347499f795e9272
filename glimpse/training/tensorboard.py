"""TensorBoard habits from CleanRL: scalars in groups that read at a glance (``losses/`` the
terms of the loss; ``train/`` the training batches and schedules; ``val/`` and ``test/`` the
fixed canvases; ``perf/`` speed), the configuration as a markdown table, pictures every N steps
(``attention/where_it_looks``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from torch.utils.tensorboard import SummaryWriter

from glimpse.training.config import TrainConfig


def hyperparameter_table(config: TrainConfig, data_source: str) -> str:
    rows = "\n".join(f"|{key}|{value}|" for key, value in config.applicable().items())
    return f"|param|value|\n|-|-|\n{rows}\n|data|{data_source}|"


class RunLogger:
    def __init__(self, run_dir: Path, config: TrainConfig, data_source: str, purge_step: int = 0):
        # purge_step drops events a crashed run wrote after its last checkpoint. A fresh run marks its
        # start at step 0 too: TensorBoard's Python loader takes the first start marker for the run's
        # own and purges only at later ones. A resumed run states its settings again where it resumes
        # (its --epochs, --data-dir or --device may have changed)
        self.writer = SummaryWriter(str(run_dir), purge_step=purge_step)
        self.writer.add_text("hyperparameters", hyperparameter_table(config, data_source), purge_step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)

    def images(self, images: dict[str, np.ndarray], step: int) -> None:
        for name, image in images.items():
            self.writer.add_image(name, image, step, dataformats="CHW")

    def flush(self) -> None:
        """Write the buffered events now: called before each last.pt, so that a run killed at once
        (SIGKILL, out of memory) loses no event at or before the step it resumes from."""
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class NullLogger:
    """What processes other than rank 0 log to: nothing."""

    def scalars(self, values: dict[str, float], step: int) -> None:
        pass

    def images(self, images: dict[str, np.ndarray], step: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
