"""What one build of the report reads and writes: :class:`ReportSettings`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from glimpse.report.experiments import ESTIMATOR_SAMPLES, GLIMPSE_COUNTS, MODELS, Experiment
from glimpse.report.measurements import SeedRuns, collect
from glimpse.report.runs import budget_epochs


@dataclass
class ReportSettings:
    """One build of the report: where its runs, records and data are, where it writes, how much it
    measures (gradient minibatches, speed steps), and which experiments, seeds and budget it holds."""

    runs_dir: Path
    out_dir: Path
    seeds: tuple[int, ...] = (0, 1, 2)
    data_dir: str | None = None
    grad_batches: int = 200
    grad_batch_size: int = 128
    speed_steps: int = 20
    speed_images: int = 2000
    command: str = "python report.py"
    models: tuple[Experiment, ...] = MODELS
    glimpse_counts: tuple[int, ...] = GLIMPSE_COUNTS
    estimator_samples: tuple[int, ...] = ESTIMATOR_SAMPLES
    converged: bool = False  # the attention models are their --converged experiments
    records_dir: Path | None = None  # where each finished run's record is kept (default <out_dir>/records)
    budget: float = 1.0  # every experiment's epochs times this (report.py --budget)
    max_steps: int = 0  # the cap its runs train under (report.py --max-steps, smoke tests); 0: none

    @property
    def records(self) -> Path:
        return self.records_dir or self.out_dir / "records"

    def collect(self, experiment: Experiment, seeds=None) -> SeedRuns:
        """The finished runs of ``experiment`` (all the report's seeds unless told), from their
        directories or else their records."""
        return collect(experiment, self.seeds if seeds is None else seeds, self.runs_dir, self.data_dir, self.records,
                       budget_epochs(experiment, self.budget), self.max_steps)
