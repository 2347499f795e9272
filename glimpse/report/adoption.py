"""Count finished checkpoints (shipped ones, say) as the report's runs: ``report.py --adopt``."""
from __future__ import annotations

from pathlib import Path

from envs.data import load_mnist
from envs.task import BENCHMARK_VERSION
from glimpse.benchmark import FRESH_SEED
from glimpse.checkpoint import load_checkpoint, training_stages
from glimpse.evaluation import evaluate_checkpoint
from glimpse.report.build import check_same_digits, pictured
from glimpse.report.document import portable
from glimpse.report.records import canvas_set_name, file_sha256, make_record, record_path, write_record
from glimpse.report.runs import RunRequest, finished_at, finished_run, rebuilt_changes, step_cap
from glimpse.report.settings import ReportSettings
from glimpse.training.config import recipe_command, resolve_config


def adopt_checkpoints(settings: ReportSettings, checkpoints: list[Path],
                      wanted: list[RunRequest]) -> list[tuple[str, Path]]:
    """Count finished single-stage runs' checkpoints (shipped ones, say) as the report's runs of the
    same recipe, seed and epochs among ``wanted``: write their records, naming the files they came
    from, so that the report reads them and ``--train`` does not train them again. Every checkpoint
    is checked before any record is written, so a refused one leaves nothing half done; a file named
    twice is taken once. Returns each run's name with its checkpoint. ValueError when a checkpoint
    matches no wanted run (the closest are named), its run exists already, or two checkpoints are
    the same run."""
    named = {}
    for checkpoint in map(Path, checkpoints):
        named.setdefault(checkpoint.resolve(), checkpoint)  # each file once, under the path first given
    checkpoints = list(named.values())
    adoptions = [(checkpoint, *_adoption(settings, checkpoint, wanted)) for checkpoint in checkpoints]
    names = [request.name for _, request, _ in adoptions]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"--adopt: two checkpoints are the report's run {', '.join(twice)}; adopt one")
    for checkpoint, request, payload in adoptions:
        if payload is not None:
            _write_adopted(settings, checkpoint, request, payload)
    return list(zip(names, checkpoints))


def _adoption(settings: ReportSettings, checkpoint: Path, wanted: list[RunRequest]) -> tuple[RunRequest, dict | None]:
    """The wanted run ``checkpoint`` would be, and its payload (None when it was adopted before);
    ValueError when it cannot be adopted. Writes nothing."""
    payload = load_checkpoint(checkpoint)
    if "test_accuracy" not in payload or "train_config" not in payload:
        raise ValueError(f"--adopt {checkpoint}: not a finished run of train.py (it holds no "
                         f"{'test accuracy' if 'test_accuracy' not in payload else 'train_config'})")
    check_same_digits(load_mnist(settings.data_dir), [payload], f"--adopt {checkpoint}")
    if step_cap(payload) != settings.max_steps:
        raise ValueError(f"--adopt {checkpoint}: trained with --max-steps {step_cap(payload)} (a capped smoke test), "
                         f"not to the end of its epochs" if step_cap(payload) else
                         f"--adopt {checkpoint}: a full run, and this report caps its runs at --max-steps "
                         f"{settings.max_steps}")
    if len(training_stages(payload)) > 1:
        raise ValueError(f"--adopt {checkpoint}: trained in {len(training_stages(payload))} stages; the report's runs "
                         f"are one run each")
    if changes := payload.get("budget_changes"):
        raise ValueError(f"--adopt {checkpoint}: resumed with another --epochs (at step {changes[0]['step']}, from "
                         f"{changes[0]['epochs']}), so its schedule is not its recipe's")
    if changed := rebuilt_changes(payload):
        raise ValueError(f"--adopt {checkpoint}: it trained a model with "
                         f"{', '.join(f'{name}={was!r}' for name, (was, _) in changed.items())}, which its recipe no "
                         f"longer builds")
    recipe = recipe_command(payload["train_config"])
    seed, epochs = payload["train_config"]["seed"], payload["train_config"]["epochs"]
    recipes = {r.name: recipe_command(resolve_config(r.experiment.train_options(r.seed, r.epochs)).to_dict())
               for r in wanted}
    request = next((r for r in wanted if recipes[r.name] == recipe), None)
    if request is None:
        same_model = [f"{r.name}: {recipes[r.name]}" for r in wanted if r.experiment.arch == payload["kind"]]
        hint = "" if settings.converged else " (a converged recipe's checkpoint needs --converged)"
        raise ValueError(f"--adopt {checkpoint}: no run of this report is its recipe ({recipe}; seed {seed}, "
                         f"{epochs} epochs){hint}. The report's runs of {payload['kind']}: "
                         f"{'; '.join(same_model) or 'none'}")
    kept = finished_run(settings.runs_dir / request.name, settings.records, settings.max_steps)
    if (kept is not None and kept.get("adopted_from") == portable(checkpoint)
            and kept.get("adopted_sha256") == file_sha256(checkpoint)):  # the name alone: two best.pt elsewhere
        return request, None  # adopted before
    if kept is not None and (kept_epochs := kept["train_config"]["epochs"]) != request.epochs:
        # a raised budget keeps its run names: the old budget's run is not this one's, nor replaced unasked
        held = finished_at(settings.runs_dir / request.name, settings.records)
        raise ValueError(f"--adopt {checkpoint}: the report holds its run {request.name} at {kept_epochs} epochs, and "
                         f"the budget asks {request.epochs}; delete {held} (the old budget's run) and adopt again")
    if kept is not None:
        held = finished_at(settings.runs_dir / request.name, settings.records)
        raise ValueError(f"--adopt {checkpoint}: the report has its run {request.name} already, in {held}; "
                         f"rebuild without --adopt to keep that one, or move it away and adopt again")
    return request, payload


def _write_adopted(settings: ReportSettings, checkpoint: Path, request: RunRequest, payload: dict) -> None:
    """The record of ``checkpoint`` as the report's run ``request``, scored on the test canvases."""
    right = {canvas_set_name(s):
             evaluate_checkpoint(checkpoint, data_dir=settings.data_dir, progress=False, per_canvas=True,
                                 canvas_seed=s)["right"] for s in (None, FRESH_SEED)}
    # scored here on today's canvases, whatever benchmark version it was tested on. The weights the
    # pictures need stay in a shipped checkpoint (checked by sha256 when read), or are copied from any
    # other file (a run finished in checkpoints/unfinished/, say, which leaves)
    tested = {"test_accuracy": float(right[canvas_set_name(None)].mean()), "benchmark": BENCHMARK_VERSION}
    shows = pictured(request.experiment, payload["kind"])
    shipped = checkpoint.resolve().parent == (Path.cwd() / "checkpoints").resolve()
    keep = shows and request.seed == settings.seeds[0] and not shipped
    write_record(record_path(settings.records, request.name),
                 {**make_record({**payload, **tested}, right, keep_weights=keep),
                  "adopted_from": portable(checkpoint), "adopted_sha256": file_sha256(checkpoint)})
