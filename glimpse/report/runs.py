"""Training the report's missing runs (as ``train.py`` subprocesses) and reading finished ones.

A run is finished when its ``best.pt`` holds the test accuracy that train.py adds at the end, or
when the report kept a record of it (:mod:`glimpse.report.records`) and its directory is gone. An
interrupted run (a ``last.pt`` but no finished ``best.pt``) is resumed, not restarted.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


import glimpse
from glimpse.progress import progress, say

from glimpse.report.experiments import Experiment
from glimpse.report.records import read_record, record_path
from glimpse.checkpoint import CheckpointError, load_checkpoint, training_stages
from glimpse.cli import option_flags
from glimpse.models import get_family
from glimpse.training.config import TrainConfig, recipe_command, resolve_config
from glimpse.training.rundir import live_holder

# the report trains with the same glimpse it runs from, installed or in a clone
GLIMPSE_PARENT = str(Path(glimpse.__file__).resolve().parents[1])
TRAIN = ("-m", "glimpse.commands.train")


@dataclass
class RunRequest:
    experiment: Experiment
    seed: int
    epochs: int

    @property
    def name(self) -> str:
        return self.experiment.run_name(self.seed)


def budget_epochs(experiment: Experiment, budget: float) -> int:
    return max(1, round(experiment.epochs * budget))


def finished_run(run_dir: Path, records_dir: Path | None = None, max_steps: int = 0) -> dict | None:
    """The finished run's best checkpoint, else its record in ``records_dir``, or None. Its
    ``history`` is the whole learning curve (older runs kept it only up to the best step in best.pt:
    then it is taken from last.pt). Only a run trained under the report's own ``--max-steps`` cap
    (``max_steps``; 0: none) counts: a smoke test's capped run is no full-budget run, and a report
    without the cap goes on training it. Nor does a run of a model its recipe no longer builds
    (:func:`rebuilt_changes`): the report trains it again."""
    for payload in _finished(run_dir, records_dir):
        if payload is not None and step_cap(payload) == max_steps and not rebuilt_changes(payload):
            return payload
    return None


def other_recipe(payload: dict, request: RunRequest) -> str | None:
    """Why a run (checkpoint or record) of ``request``'s name is not its recipe's run, or None: it
    was trained with other options (a family's converged recipe changed since), in several stages, or
    resumed with another --epochs. Its epochs are left to the budget checks."""
    if payload.get("budget_changes"):
        return f"resumed with another --epochs (at step {payload['budget_changes'][0]['step']})"
    if len(training_stages(payload)) > 1:
        return f"trained in {len(training_stages(payload))} stages"
    epochs = payload["train_config"]["epochs"]
    theirs = recipe_command(payload["train_config"])
    ours = recipe_command(resolve_config(request.experiment.train_options(request.seed, epochs)).to_dict())
    return None if theirs == ours else f"trained as `{theirs}`, and its recipe is `{ours}`"


def stale_changes(run_dir: Path, records_dir: Path | None = None) -> dict[str, tuple]:
    """:func:`rebuilt_changes` of the run's finished checkpoint, else of its record ({}: neither is stale)."""
    return next((changed for payload in _finished(run_dir, records_dir)
                 if payload is not None and (changed := rebuilt_changes(payload))), {})


def rebuilt_changes(payload: dict) -> dict[str, tuple]:
    """Where the model a run trained differs from the one its recipe builds today (a family's gradient
    corrected since, say): such a run is not this version's run of its recipe."""
    family = get_family(payload["kind"])
    return family.config_changes(payload["model_config"],
                                 family.model_config(TrainConfig.from_dict(payload["train_config"])))


def _finished(run_dir: Path, records_dir: Path | None):
    yield _finished_checkpoint(run_dir)
    yield read_record(record_path(records_dir, run_dir.name)) if records_dir is not None else None


def step_cap(payload: dict) -> int:
    """The --max-steps a run (checkpoint or record) was capped at; 0: none."""
    return int(payload["train_config"].get("max_steps") or 0)


def finished_at(run_dir: Path, records_dir: Path | None) -> Path:
    """Where :func:`finished_run` reads the run from: its directory when that holds a finished
    checkpoint, else its record."""
    return run_dir if _finished_checkpoint(run_dir) is not None else record_path(records_dir, run_dir.name)


def _finished_checkpoint(run_dir: Path) -> dict | None:
    try:
        payload = load_checkpoint(run_dir / "best.pt")
        if "test_accuracy" not in payload:
            return None
        last = run_dir / "last.pt"
        if last.exists():
            longer = load_checkpoint(last).get("history", [])
            if len(longer) > len(payload.get("history", [])):
                payload["history"] = longer
        return payload
    except CheckpointError:
        return None


def _started(run_dir: Path) -> dict | None:
    """An interrupted run's last.pt in ``run_dir``, or None."""
    try:
        return load_checkpoint(run_dir / "last.pt") if (run_dir / "last.pt").exists() else None
    except CheckpointError:
        return None  # train.py --resume names what is wrong with it


def _started_epochs(run_dir: Path) -> int | None:
    """The epochs an interrupted run in ``run_dir`` was started for (its last.pt), or None."""
    started = _started(run_dir)
    return None if started is None else started["train_config"]["epochs"]


def train_command(request: RunRequest, runs_dir: Path, *, threads: int, max_steps: int = 0,
                  data_dir: str | None = None) -> list[str]:
    run_dir = runs_dir / request.name
    common = {"threads": threads, "max_steps": max_steps or None}
    if (run_dir / "last.pt").exists():  # interrupted (or capped by a smoke test): continue it exactly
        return [sys.executable, *TRAIN, "--resume", str(run_dir),
                *option_flags({"epochs": request.epochs, **common, "max_steps": max_steps, "data_dir": data_dir})]
    options = {**request.experiment.train_options(request.seed, request.epochs), **common,
               "data_dir": data_dir, "run_dir": str(runs_dir), "run_name": request.name}
    return [sys.executable, *TRAIN, *option_flags(options)]


def train_missing(requests: list[RunRequest], runs_dir: Path, *, jobs: int = 1, threads: int = 1,
                  max_steps: int = 0, data_dir: str | None = None, quiet: bool = False,
                  records_dir: Path | None = None, on_finished=None) -> tuple[list[str], list[str]]:
    """Train every request whose run is not finished (nor kept as a record in ``records_dir``),
    ``jobs`` at a time, each process with ``threads`` torch threads; each run's output goes to
    ``<runs>/<name>.log``, and ``on_finished(request)`` is called as each run ends well. A run that
    another process is training (a second report on the same folder, a train.py --resume) is left
    to it, not counted as failed. Returns the names of the runs that failed (their logs say why) and
    of those left to another process."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    finished = {r.name: finished_run(runs_dir / r.name, records_dir, max_steps) for r in requests}
    conflicts = [f"{r.name} ({run['train_config']['epochs']} epochs, the budget asks {r.epochs})" for r in requests
                 if (run := finished[r.name]) is not None and run["train_config"]["epochs"] != r.epochs]
    if conflicts:
        raise ValueError(f"finished runs in {runs_dir}{f' or {records_dir}' if records_dir else ''} have another "
                         f"budget: {'; '.join(conflicts)}. Delete them, or choose other --runs and --records "
                         f"folders (or --out, whose records/ they default to)")
    others = [f"{r.name}: {why}" for r in requests if (run := finished[r.name]) is not None
              and (why := other_recipe(run, r))]
    others += [f"{r.name}: {why} (interrupted)" for r in requests if finished[r.name] is None
               and (started := _started(runs_dir / r.name)) is not None and (why := other_recipe(started, r))]
    if others:  # counted as this recipe's run, or resumed under its old settings, it would not be one
        raise ValueError(f"runs in {runs_dir}{f' or {records_dir}' if records_dir else ''} are not their "
                         f"recipe's runs: {'; '.join(others)}. Delete them, or choose other --runs and --records "
                         f"folders")
    todo = [r for r in requests if finished[r.name] is None]
    stale = [f"{r.name} ({', '.join(f'{k}={was!r}' for k, (was, _) in changed.items())})" for r in todo
             if (changed := stale_changes(runs_dir / r.name))]
    if stale:  # its directory would be resumed as, or refused for, another model
        raise ValueError(f"runs in {runs_dir} trained a model their recipe no longer builds: {'; '.join(stale)}. "
                         f"Delete them or choose another --runs folder")
    # a half-trained run of another budget: resumed at this one, its cosine schedule would change midway
    started = [f"{r.name} ({epochs} epochs, the budget asks {r.epochs})" for r in todo
               if (epochs := _started_epochs(runs_dir / r.name)) not in (None, r.epochs)]
    if started:
        raise ValueError(f"runs in {runs_dir} were started for another budget: {'; '.join(started)}. Finish them at "
                         f"their own (train.py --resume), delete them, or choose another --runs folder")
    failed, left = [], []
    tell = (lambda message: None) if quiet else say
    if todo:
        tell(f"[report] {len(todo)} of {len(requests)} runs to train, {max(1, jobs)} at a time; "
             f"each writes its progress to {runs_dir}/<run>.log")

    def run(request: RunRequest) -> None:
        if (holder := live_holder(runs_dir / request.name)) is not None:
            tell(f"[report] {request.name}: being trained by another process ({holder}); left to it")
            left.append(request.name)
            return
        command = train_command(request, runs_dir, threads=threads, max_steps=max_steps, data_dir=data_dir)
        log_path = runs_dir / f"{request.name}.log"
        tell(f"[report] {request.name}: {'resumed' if '--resume' in command else 'started'} (log: {log_path})")
        start = time.perf_counter()
        with open(log_path, "a") as log:
            log.write(" ".join(command) + "\n")
            log.flush()
            path = os.pathsep.join(p for p in (GLIMPSE_PARENT, os.environ.get("PYTHONPATH")) if p)
            result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": path})
        minutes = (time.perf_counter() - start) / 60
        if result.returncode in (130, -signal.SIGINT):  # Ctrl-C reached the run too: it stopped at a checkpoint
            tell(f"[report] {request.name}: interrupted after {minutes:.1f} min; it resumes where it stopped")
            raise KeyboardInterrupt
        if result.returncode != 0 and (holder := live_holder(runs_dir / request.name)) is not None:
            tell(f"[report] {request.name}: taken by another process ({holder}) as it started; left to it")
            left.append(request.name)
        elif result.returncode != 0:
            failed.append(request.name)
            tell(f"[report] {request.name}: failed after {minutes:.1f} min, see {log_path}")
        else:
            tell(f"[report] {request.name}: finished in {minutes:.1f} min")
            if on_finished is not None:
                on_finished(request)

    # runs differ in length by hours: the bar counts them, with no rate or time left
    with progress(total=len(todo), desc="report runs", unit="run", disable=quiet, timed=False) as bar, \
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for _ in pool.map(lambda r: (run(r), bar.update(1)), todo):
            pass
    return failed, left
