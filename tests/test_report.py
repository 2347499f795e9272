"""report.py: the comparison report builds from tiny runs in a temporary folder."""
import numpy as np
import torch
import pytest
from PIL import Image

from glimpse.commands import report
from glimpse.report.document import HEADLINE_END, HEADLINE_START, update_readme
from glimpse.report.experiments import by_name
from glimpse.models import get_family

RAM, DRAW, FC, RANDOM = by_name("ram"), by_name("draw"), by_name("fc"), by_name("ram-random")
from glimpse.report.measurements import SeedRuns, time_to_threshold
from glimpse.checkpoint import load_checkpoint
from glimpse.benchmark import FRESH_SEED
from glimpse.evaluation import evaluate_checkpoint

TINY = ["--max-steps", "2", "--data-dir", "bundled", "--grad-batches", "2", "--speed-steps", "1", "--jobs", "2",
        "--threads", "1"]


def test_report_builds_from_tiny_runs(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--runs", str(runs), "--out", str(out), "--train", "--seeds", "2", "--models", "ram,draw,fc",
            "--glimpses", "1,6", "--estimators", "2", *TINY]
    assert report.main(argv) == 0
    # every model twice, the sweep's extra count once per swept model (6 glimpses is the seed-0 run),
    # and RAM once more with the leave-one-out baseline (K = 1 is the ram-seed0 run)
    names = sorted(p.name for p in runs.iterdir() if p.is_dir())
    assert names == sorted(["ram-seed0", "ram-seed1", "draw-seed0", "draw-seed1", "fc-seed0", "fc-seed1",
                            "ram-1g-seed0", "draw-1g-seed0", "ram-loo2-seed0"])
    assert load_checkpoint(runs / "ram-1g-seed0" / "best.pt")["task"]["n_glimpses"] == 1
    assert load_checkpoint(runs / "ram-loo2-seed0" / "best.pt")["train_config"]["reinforce_samples"] == 2
    text = (out / "compare.md").read_text()
    for label in (RAM.label, DRAW.label, FC.label):
        assert label in text
    # the per-seed errors in the report are the runs' own test errors
    errors = [100 * (1 - load_checkpoint(runs / f"ram-seed{s}" / "best.pt")["test_accuracy"]) for s in (0, 1)]
    assert f"| {RAM.label} | 20 | 2 | {errors[0]:.2f} (" in text and f"), {errors[1]:.2f} (" in text
    # and beside them each run's error on fresh canvases, by the code behind evaluate.py --canvas-seed
    fresh = [100 * evaluate_checkpoint(runs / f"ram-seed{s}" / "best.pt", data_dir="bundled", canvas_seed=FRESH_SEED,
                                       progress=False)["error"] for s in (0, 1)]
    ram_row = next(line for line in text.splitlines() if line.startswith(f"| {RAM.label} | 20 | 2 |"))
    assert f"| {fresh[0]:.2f}, {fresh[1]:.2f} |" in ram_row
    fresh_right = np.load(runs / "ram-seed0" / f"fresh-seed{FRESH_SEED}-right-v1.npy")
    assert (fresh_right != np.load(runs / "ram-seed0" / "test-right-v1.npy")).any()  # other canvases
    # the cost counts every run the report trained, the sweep's and the estimators' too
    minutes = sum(load_checkpoint(runs / name / "best.pt")["train_seconds"] for name in names) / 60
    assert f"Recorded training time of all {len(names)} runs of this report: {minutes:.0f} minutes" in text
    # every pair of models is tested on the same canvases, both seeds paired
    assert "## Which differences are real" in text
    assert text.count("| 2 | ") >= 3 and f"| {RAM.label} | {DRAW.label} | 2 |" in text
    right = np.load(runs / "ram-seed0" / "test-right-v1.npy")
    assert right.dtype == bool and abs(right.mean() - (1 - errors[0] / 100)) < 1e-9
    assert f"| {RAM.label} | REINFORCE + learned baseline | " in text and f"| {DRAW.label} | backpropagation | " in text
    assert f"(RAM: {get_family('ram').attention_module_text}; DRAW read: " in text
    assert all(f"leave-one-out baseline, K = {k} |" in text for k in (2, 4, 8))
    assert "## One policy, two estimators" not in text  # none of these draws its locations reparameterised
    # sensor against gradient: a row per model that says what it reads and how it learns where
    assert "## Sensor against gradient" in text and f"| retina: a few glimpses | REINFORCE | {RAM.label} | " in text
    assert f"| filterbank: Gaussian filters over the whole canvas | backpropagation | {DRAW.label} | " in text
    assert f"| {FC.label} |" not in text.split("## Sensor against gradient")[1].split("## ")[0]  # not a row there
    # a generated file keeps no machine paths
    assert str(tmp_path) not in text and "/runs`" not in text
    assert "| leave-one-out, K = 2 | " in text and "| learned baseline | " in text
    # the glimpse sweep puts the family's own paper numbers beside the lab's (RAM: 4.08 % at 6 glimpses)
    sweep_rows = text.split("## Accuracy against the number of glimpses")[1].split("\n## ")[0].splitlines()
    assert next(r for r in sweep_rows if r.startswith("| 6 |")).split(" | ")[2] == "4.08"
    for png in ("learning_curves.png", "glimpse_sweep.png", "where_they_look.png", "estimators.png"):
        with Image.open(out / png) as image:
            assert image.size[0] > 300 and image.size[1] > 200
        assert f"]({png})" in text
    # a second call finds every run finished and trains nothing (--no-report: no second round of measurements)
    stamps = {p: p.stat().st_mtime_ns for p in runs.glob("*/best.pt")}
    assert report.main([*argv, "--no-report"]) == 0
    assert stamps == {p: p.stat().st_mtime_ns for p in runs.glob("*/best.pt")}
    # another budget for the same runs is refused, and nothing is touched
    capsys.readouterr()
    assert report.main([*argv, "--budget", "2"]) == 2
    assert "another budget" in capsys.readouterr().err
    assert stamps == {p: p.stat().st_mtime_ns for p in runs.glob("*/best.pt")}
    check_the_records_rebuild_it(runs, out, argv, names, text)


def test_one_policy_is_measured_with_both_estimators_at_trained_weights_and_at_initialisation(tmp_path):
    """The differentiable retina's reparameterised variant draws its locations from RAM's Gaussian
    policy: the report measures REINFORCE's score function against the exact gradient of that policy
    on the seed-0 run, at each K, and its numbers are glimpse.gradient_noise's on the run's weights."""
    from glimpse.checkpoint import load_model
    from envs.data import load_mnist
    from glimpse.gradient_noise import location_estimator_noise, run_initialisation

    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--runs", str(runs), "--out", str(out), "--train", "--seeds", "1", "--models", "ram-diff,ram-diff-deterministic",
            *TINY]
    assert report.main(argv) == 0
    text = (out / "compare.md").read_text()
    section = text.split("## One policy, two estimators")[1].split("\n## ")[0]
    diff, deterministic = by_name("ram-diff"), by_name("ram-diff-deterministic")
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith(f"| {diff.label} | ")]
    assert [(row[1], row[2], row[3]) for row in rows] == [
        (weights, str(k), estimator) for weights in ("initialisation", "trained") for k in (2, 4, 8)
        for estimator in ("reparameterised, exact", "reparameterised, as trained", "score function, leave-one-out")]
    assert f"| {deterministic.label} |" not in section  # its locations are not drawn: no second estimator
    assert all(row[6] == "1" and row[7] == "– |" for row in rows if row[3].startswith("score function"))
    assert f"- **{diff.label}**: at initialisation the exact gradient's total variance is " in section
    # the numbers are the measurement's own, on the run's weights and on its initialisation
    trained, payload = load_model(runs / diff.run_name(0) / "best.pt")
    digits = load_mnist("bundled").train
    for weights, model in (("trained", trained), ("initialisation", run_initialisation(payload))):
        result = location_estimator_noise(model, payload["kind"], payload["task"], digits, 4, 2, 32)
        row = next(r for r in rows if r[1:4] == [weights, "4", "reparameterised, exact"])
        assert row[4] == f"{result['reparameterised']['trace']:.4g}"
        assert row[6] == f"{result['reparameterised']['trace'] / result['score function']['trace']:.3g}"


def check_the_records_rebuild_it(runs, out, argv, names, text):
    """A record of each finished run is kept beside the report: with the runs' directories gone (a
    new machine), the report reads the same errors, fresh-canvas errors and paired tests from the
    records, still draws where seed 0 looks, and --train trains nothing again."""
    import shutil
    from envs.task import BENCHMARK_VERSION
    from glimpse.report.records import read_record

    assert sorted(p.stem for p in (out / "records").iterdir()) == names
    kept = {name: read_record(out / "records" / f"{name}.pt") for name in names}
    # weights only where the pictures need them: seed 0 of the models that learn where to look
    assert [name for name in names if "model_state" in kept[name]] == ["draw-seed0", "ram-seed0"]
    assert (out / "records" / "ram-seed1.pt").stat().st_size < 100_000
    test, fresh = f"test-v{BENCHMARK_VERSION}", f"fresh-seed{FRESH_SEED}-v{BENCHMARK_VERSION}"
    for name, record in kept.items():
        best = load_checkpoint(runs / name / "best.pt")
        assert record["test_accuracy"] == best["test_accuracy"] and record["history"] == best["history"]
        assert str(runs.parent) not in repr({k: v for k, v in record.items() if k != "model_state"})
        if name.count("-") == 1:  # the comparison's runs keep their results canvas by canvas, on both sets
            right = record["right"]
            assert right[test].dtype == bool and abs(right[test].mean() - best["test_accuracy"]) < 1e-9
            assert (right[fresh] == np.load(runs / name / f"fresh-seed{FRESH_SEED}-right-v1.npy")).all()
        else:  # the sweep's and the estimators' runs: their curve and error alone
            assert record["right"] == {}
    shutil.rmtree(runs)
    assert report.main(argv) == 0
    assert not list(runs.glob("*/best.pt"))  # every run was kept: nothing trained again
    after = (out / "compare.md").read_text()

    def section(text: str, title: str) -> str:  # the speeds are measured anew; the rest is read from the runs
        return text.split(f"## {title}")[1].split("\n## ")[0]
    for title in ("Runs and budgets", "Which differences are real",
                  "Exact vs approximate gradient", "Accuracy against the number of glimpses"):
        assert section(after, title) == section(text, title)
    # seed 0's kept weights still give REINFORCE's noise at trained weights, and the pictures
    assert all(f"leave-one-out baseline, K = {k} |" in after for k in (2, 4, 8))
    assert "](where_they_look.png)" in after
    # a record that is not one is refused by name
    (out / "records" / "ram-seed1.pt").write_bytes(b"not a record")
    assert report.main(argv) == 2


def test_converged_report_trains_the_families_recipes_in_runs_of_their_own(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--runs", str(runs), "--out", str(out), "--train", "--converged", "--seeds", "1",
            "--models", "ram,fc,ram-random", *TINY]
    assert report.main(argv) == 0
    # it says what it trains and where each run's log is, as each starts and ends
    err = capsys.readouterr().err
    assert "[report] 4 of 4 runs to train, " in err
    assert f"[report] ram-converged-seed0: started (log: {runs / 'ram-converged-seed0.log'})" in err
    assert "[report] ram-converged-seed0: finished in " in err
    # RAM trains its recipe at its converged budget, and seed 0 once more at twice it (a plateau that
    # was a pause shows there); the baselines keep their short runs; no sweep
    assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == ["fc-seed0", "ram-converged-seed0",
                                                                     "ram-converged-x2-seed0", "ram-random-seed0"]
    assert load_checkpoint(runs / "ram-converged-x2-seed0" / "best.pt")["train_config"]["epochs"] == \
        2 * get_family("ram").converged_epochs
    config = load_checkpoint(runs / "ram-converged-seed0" / "best.pt")["train_config"]
    family = get_family("ram")
    assert config["epochs"] == family.converged_epochs
    assert {k: config[k] for k in family.converged_recipe} == family.converged_recipe
    assert load_checkpoint(runs / "fc-seed0" / "best.pt")["train_config"]["epochs"] == FC.epochs
    text = (out / "compare.md").read_text()
    assert "states a best-known recipe was trained with it" in text
    assert f"| {RAM.label} | {family.converged_epochs} | 1 |" in text
    ram_row = next(line for line in text.splitlines() if line.startswith(f"| {RAM.label} | {family.converged_epochs}"))
    assert ": counts as converged (" in ram_row or ": not converged (" in ram_row  # the doubling check's verdict
    fc_row = next(line for line in text.splitlines() if line.startswith(f"| {FC.label} | {FC.epochs} |"))
    assert "– (short budget)" in fc_row and "not trained" not in fc_row  # no doubling asked of a short budget
    assert f"short budgets of the default report: {FC.label}; {RANDOM.label}." in text  # named from the runs
    # the gradient spread is measured on the converged run, with the estimator it trained with
    k = family.converged_recipe["reinforce_samples"]
    assert f"| {RAM.label} | REINFORCE + leave-one-out baseline, K = {k} | " in text
    assert f"(RAM: {family.attention_module_text})" in text
    # the bigger-canvas table measures each model as its runs configured it: RAM with its recipe's
    # conv reader costs what the cost table says, RAM with random glimpses (the linear one) less
    def row(table_header: str, label: str) -> list[str]:
        table = text[text.index(table_header):]
        return next(line for line in table.splitlines() if line.startswith(f"| {label} |")).split(" | ")
    growth_header = "| model | pixels touched, 60x60 |"
    assert row(growth_header, RAM.label)[5] == row("| model | pixels touched | values in |", RAM.label)[3]
    assert row(growth_header, RAM.label)[5] != row(growth_header, "RAM, random glimpses")[5]
    steady = text.split("on bigger canvases")[1].split("\n")[0]  # says which models' cost stays put, from the table
    assert RAM.label in steady and "RAM, random glimpses" in steady and FC.label not in steady
    assert "Accuracy against the number of glimpses" not in text and not (out / "glimpse_sweep.png").exists()
    assert f"| {'cuda:0' if torch.cuda.is_available() else 'cpu'} (1 thread) |" in text  # train.py's --device auto
    # the sweep and the estimator runs belong to the short report
    capsys.readouterr()
    assert report.main([*argv, "--glimpses", "2"]) == 2
    assert "--glimpses" in capsys.readouterr().err


def test_a_finished_checkpoint_of_the_same_recipe_is_adopted_as_the_reports_run(tmp_path, capsys):
    """--adopt counts a finished run of the report's recipe, seed and epochs (a shipped checkpoint)
    as the report's own: its record names the file (whose weights the gallery reads while its sha256
    holds), the report says so, and it is not trained again. A checkpoint of another recipe is
    refused, naming the report's recipe for its model."""
    import shutil
    from glimpse.commands import train
    from glimpse.checkpoint import save_checkpoint
    from glimpse.report.records import read_record

    elsewhere, runs, out = tmp_path / "elsewhere", tmp_path / "runs", tmp_path / "out"
    for name, epochs in (("same", RAM.epochs), ("other", RAM.epochs + 1)):
        assert train.main(["--preset", "cluttered60", "--mode", "hard", "--arch", "ram", "--epochs", str(epochs),
                           "--max-steps", "2", "--data-dir", "bundled", "--run-dir", str(elsewhere),
                           "--run-name", name]) == 0
    argv = ["--runs", str(runs), "--out", str(out), "--seeds", "1", "--models", "ram", "--glimpses", "",
            "--estimators", "", *TINY]
    capsys.readouterr()
    assert report.main([*argv, "--adopt", str(elsewhere / "other" / "best.pt")]) == 2
    err = capsys.readouterr().err
    assert "no run of this report is its recipe" in err and "ram-seed0: python train.py --mode hard --arch ram" in err
    assert not (out / "records").exists()
    adopted = elsewhere / "same" / "best.pt"
    # a run resumed with another --epochs may end with the recipe's, but its schedule was not the recipe's
    (elsewhere / "changed").mkdir()
    save_checkpoint(elsewhere / "changed" / "best.pt",
                    {**load_checkpoint(adopted), "budget_changes": [{"step": 1, "epochs": RAM.epochs + 1}]})
    assert report.main([*argv, "--adopt", str(elsewhere / "changed" / "best.pt")]) == 2
    assert f"resumed with another --epochs (at step 1, from {RAM.epochs + 1})" in capsys.readouterr().err
    assert not (out / "records").exists()
    # every checkpoint is checked before any is adopted: a refused one leaves no record of the others
    assert report.main([*argv, "--adopt", str(adopted), str(elsewhere / "other" / "best.pt")]) == 2
    assert not (out / "records").exists()
    # --no-report keeps the record and builds nothing (the report comes later, on an idle machine)
    assert report.main([*argv, "--no-report", "--readme", str(tmp_path / "README.md")]) == 2
    assert "--readme writes the report's headline" in capsys.readouterr().err
    assert report.main([*argv, "--no-report", "--adopt", str(adopted)]) == 0
    assert (out / "records" / "ram-seed0.pt").exists() and not (out / "compare.md").exists()
    assert "no report built: --no-report" in capsys.readouterr().out
    (out / "records" / "ram-seed0.pt").unlink()
    assert report.main([*argv, "--train", "--adopt", str(adopted), str(adopted)]) == 0  # named twice: taken once
    assert not (runs / "ram-seed0").exists()  # adopted, not trained
    record = read_record(out / "records" / "ram-seed0.pt")
    assert record["adopted_from"] == "best.pt" and "model_state" in record  # not a shipped file: its weights kept
    assert record["test_accuracy"] == load_checkpoint(adopted)["test_accuracy"]
    runs_table = (out / "compare.md").read_text().split("## Runs and budgets")[1]
    assert "adopted from `best.pt`" in next(line for line in runs_table.splitlines() if line.startswith(f"| {RAM.label} |"))
    assert report.main([*argv, "--adopt", str(adopted)]) == 0  # again: nothing to do
    # another file of the same run is refused, naming where the report holds it and what to do
    (elsewhere / "again").mkdir()
    save_checkpoint(elsewhere / "again" / "best.pt", {**load_checkpoint(adopted), "step": 1})
    capsys.readouterr()
    assert report.main([*argv, "--adopt", str(elsewhere / "again" / "best.pt")]) == 2
    err = capsys.readouterr().err
    assert f"has its run ram-seed0 already, in {out / 'records' / 'ram-seed0.pt'}" in err and "without --adopt" in err
    assert read_record(out / "records" / "ram-seed0.pt")["adopted_from"] == "best.pt"  # left as it was
    # a raised budget keeps the run's name: the old budget's record is named to delete, not taken as the new one's
    capsys.readouterr()
    raised = ["--budget", str((RAM.epochs + 1) / RAM.epochs)]
    assert report.main([*argv, *raised, "--adopt", str(elsewhere / "other" / "best.pt")]) == 2
    err = capsys.readouterr().err
    assert f"at {RAM.epochs} epochs, and the budget asks {RAM.epochs + 1}; delete " in err and "ram-seed0.pt" in err
    assert read_record(out / "records" / "ram-seed0.pt")["adopted_from"] == "best.pt"  # left as it was
    assert (out / "where_they_look.png").exists()
    # a shipped checkpoint (one in the checkpoints/ folder where the report runs) keeps its weights
    # there: the gallery reads them while it is the same file
    shipped = tmp_path / "checkpoints" / "ram-shipped.pt"
    shipped.parent.mkdir()
    shutil.copy(adopted, shipped)
    (out / "records" / "ram-seed0.pt").unlink()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert report.main([*argv, "--adopt", "checkpoints/ram-shipped.pt"]) == 0
        assert "model_state" not in read_record(out / "records" / "ram-seed0.pt")
        assert (out / "where_they_look.png").exists()
        (out / "where_they_look.png").unlink()
        save_checkpoint(shipped, {**load_checkpoint(shipped), "step": 1})  # another file now
        assert report.main(argv) == 0 and not (out / "where_they_look.png").exists()
        runs_table = (out / "compare.md").read_text().split("## Runs and budgets")[1]
        ram_row = next(line for line in runs_table.splitlines() if line.startswith(f"| {RAM.label} |"))
        assert "adopted from an earlier `checkpoints/ram-shipped.pt` (sha256 " in ram_row and "since replaced" in ram_row


def test_another_seed_s_run_at_twice_the_budget_settles_the_doubling_check(tmp_path, capsys):
    """A finished run of the recipe at twice the epochs with seed 1 (a shipped checkpoint, say) is adopted
    as the doubling check: --train then trains the budget's seeds and not seed 0's doubled run, and the
    check names the seed it read."""
    from glimpse.cli import option_flags
    from glimpse.commands import train
    from glimpse.report.experiments import converged, doubled

    twice = doubled(converged(RAM))
    elsewhere, runs, out = tmp_path / "elsewhere", tmp_path / "runs", tmp_path / "out"
    assert train.main([*option_flags(twice.train_options(1, twice.epochs)), "--max-steps", "2", "--data-dir", "bundled",
                       "--run-dir", str(elsewhere), "--run-name", "seed1-twice"]) == 0
    argv = ["--runs", str(runs), "--out", str(out), "--converged", "--seeds", "2", "--models", "ram", *TINY]
    capsys.readouterr()
    assert report.main([*argv, "--train", "--adopt", str(elsewhere / "seed1-twice" / "best.pt")]) == 0
    assert "ram-converged-x2-seed1: adopted" in capsys.readouterr().err
    assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == ["ram-converged-seed0", "ram-converged-seed1"]
    runs_table = (out / "compare.md").read_text().split("## Runs and budgets")[1]
    ram_row = next(line for line in runs_table.splitlines() if line.startswith(f"| {RAM.label} |"))
    assert "| seed 1: " in ram_row and "against seed 0: " in ram_row and "seeds 1 and 0 of the budget: " in ram_row
    # seed 0 at twice the budget as well: each doubled seed is checked against the budget's seeds, a line each
    assert train.main([*option_flags(twice.train_options(0, twice.epochs)), "--max-steps", "2", "--data-dir", "bundled",
                       "--run-dir", str(runs), "--run-name", "ram-converged-x2-seed0"]) == 0
    assert report.main(argv) == 0
    runs_table = (out / "compare.md").read_text().split("## Runs and budgets")[1]
    ram_row = next(line for line in runs_table.splitlines() if line.startswith(f"| {RAM.label} |"))
    assert "| seed 0: " in ram_row and "<br>seed 1: " in ram_row and "seeds 0 and 1 of the budget: " in ram_row
    # its record keeps both canvas sets, as the check reads both; the total time counts the doubled runs
    from glimpse.report.records import canvas_set_name, read_record
    kept = read_record(out / "records" / "ram-converged-x2-seed0.pt")["right"]
    assert set(kept) == {canvas_set_name(None), canvas_set_name(FRESH_SEED)}
    assert "Recorded training time of all 4 runs of this report (the doubling checks among them)" in \
        (out / "compare.md").read_text()


@pytest.mark.parametrize("bad, says", [
    (["--models", "ram,vit"], "--models: unknown ['vit']"), (["--glimpses", "0"], "--glimpses counts must be >= 1"),
    (["--glimpses", "a"], "--glimpses must be comma-separated integers"), (["--seeds", "0"], "--seeds must be >= 1"),
    (["--budget", "0"], "--budget must be a number above 0"), (["--grad-batches", "1"], "--grad-batches must be >= 2"),
    (["--estimators", "1"], "--estimators counts must be >= 2"),
    (["--estimators", "x"], "--estimators must be comma-separated integers"),
    (["--threads", "100000"], "--threads must be between 1 and"),
    (["--readme", "/nonexistent/README.md"], "--readme /nonexistent/README.md: no such file")])
def test_report_bad_options_exit_2(bad, says, tmp_path, capsys):
    # with no finished runs in --runs the build itself fails too: the message shows the option check refused first
    assert report.main(["--runs", str(tmp_path), "--out", str(tmp_path / "out"), "--data-dir", "bundled", *bad]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_report_folder_under_a_file_is_bad_input(tmp_path, capsys):
    (tmp_path / "notes").write_text("a file")
    assert report.main(["--runs", str(tmp_path / "notes" / "runs"), "--data-dir", "bundled"]) == 2
    assert f"{tmp_path / 'notes'} is a file, not a directory" in capsys.readouterr().err


def test_report_without_runs_says_how_to_get_them(tmp_path, capsys):
    assert report.main(["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--data-dir", "bundled"]) == 2
    assert "--train" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_paired_tests_pool_matching_seeds_and_holm_adjust():
    from glimpse.report.measurements import paired_tests

    class Fixed(SeedRuns):
        def __init__(self, experiment, rights, seeds):
            super().__init__(experiment, [{"train_config": {"seed": s}} for s in seeds], [])
            self.rights = rights

        def right(self, index):
            return self.rights[index]

    n = 1000
    good = Fixed(RAM, [np.r_[np.ones(n - 10, bool), np.zeros(10, bool)]] * 2, (0, 1))
    bad = Fixed(DRAW, [np.r_[np.zeros(100, bool), np.ones(n - 100, bool)]] * 2, (0, 1))
    other = Fixed(FC, [np.r_[np.zeros(101, bool), np.ones(n - 101, bool)]], (0,))
    tests = {(t["a"].name, t["b"].name): t for t in paired_tests([good, bad, other])}
    ram_draw = tests[(RAM.name, DRAW.name)]
    # RAM right where DRAW is wrong on canvases 0-99, DRAW right where RAM is wrong on the last 10: per seed, pooled
    assert (ram_draw["seeds"], ram_draw["only_a"], ram_draw["only_b"]) == (2, 200, 20)
    assert ram_draw["p"] < 1e-6 and ram_draw["p_holm"] <= 3 * ram_draw["p"]
    draw_fc = tests[(DRAW.name, FC.name)]
    assert draw_fc["seeds"] == 1 and (draw_fc["only_a"], draw_fc["only_b"]) == (1, 0)  # canvas 100
    assert draw_fc["p_holm"] == 1.0  # one canvas is no evidence
    assert all(t["p_holm"] >= t["p"] for t in tests.values())


def test_convergence_allows_for_the_validation_noise_and_a_plateau_is_caught_by_twice_the_epochs():
    from types import SimpleNamespace

    from glimpse.report.document import _doubling_cell
    from glimpse.report.measurements import converged_by_noise, doubling_check, late_gain, validation_noise

    curve = [{"epoch": e, "val_accuracy": a} for e, a in enumerate([0.5, 0.8, 0.9, 0.95, 0.951, 0.9512, 0.951, 0.9515,
                                                                     0.9514, 0.9516], start=1)]
    assert late_gain(curve) == pytest.approx(0.9516 - 0.9515)  # best of epochs 1-8 against best of all 10
    assert validation_noise(0.98, 5000) == pytest.approx(0.00198, abs=1e-5)  # one evaluation's standard error
    assert converged_by_noise(curve, 5000)[0]
    # the Spatial Transformer's 40 epochs: +0.20 point, within two standard errors (0.4 point) of noise
    stn = [{"epoch": e, "val_accuracy": 0.9828 if e < 33 else 0.9848} for e in range(1, 41)]
    assert converged_by_noise(stn, 5000)[0] and not converged_by_noise(curve[:4], 5000)[0]
    assert late_gain([]) is None and converged_by_noise([], 5000) is None
    # ... so the plateau is caught by twice the epochs: 81 canvases against 46 (its 80-epoch run), p = 0.0024
    right = np.ones(10_000, bool)
    forty, eighty = right.copy(), right.copy()
    forty[:81] = False
    eighty[100:146] = False
    def runs(r, error, seed=0, epochs=40):
        return SimpleNamespace(runs=[{"train_config": {"epochs": epochs}}], seeds=[seed],
                               right=lambda index, canvas_seed=None: r,
                               test_errors=np.array([error]))
    check = doubling_check(runs(forty, 0.0159), runs(eighty, 0.0124, epochs=80))
    assert not check["converged"] and check["p"] < 0.01 and check["doubled_error"] == 0.0124
    assert check["doubled_epochs"] == 80 and "not converged (81 against 46 canvases, p = 0.0024); on fresh canvases, reads more right there (81 against 46, p = 0.0024)" in _doubling_cell(check)
    assert doubling_check(runs(forty, 0.0159), runs(forty, 0.0159))["converged"]
    worse = doubling_check(runs(eighty, 0.0124), runs(forty, 0.0159, epochs=80))  # twice the epochs lost
    assert worse["converged"] and "reads less right: counts as converged, but" in _doubling_cell(worse)
    same = doubling_check(runs(forty, 0.0159), runs(forty, 0.0159))
    assert "no gain shown: counts as converged" in _doubling_cell(same)
    assert doubling_check(runs(forty, 0.0159), SimpleNamespace(runs=[], seeds=[])) is None
    assert doubling_check(runs(forty, 0.0159, seed=1), runs(eighty, 0.0124)) is None  # seed 0's, not another's
    # with two seeds the doubled run must beat each: seed 1 reads as well as twice the budget (seeds alone
    # differ that much), so no gain over the budget is shown
    lucky = right.copy()
    lucky[200:246] = False
    two = SimpleNamespace(runs=[{"train_config": {"epochs": 40}}] * 2, seeds=[0, 1], test_errors=np.array([0.0081, 0.0046]),
                          right=lambda index, canvas_seed=None: (forty, lucky)[index])
    check = doubling_check(two, runs(eighty, 0.0124, epochs=80))
    assert check["converged"] and [t["seed"] for t in check["against_seeds"]] == [1]
    assert check["seeds_apart"]["seeds"] == (0, 1) and check["seeds_apart"]["p"] < 0.01
    cell = _doubling_cell(check)
    assert cell.startswith("seed 0: 1.24 %, reads more right than its own seed only, not than every seed (seeds "
                           "differ that much): counts as converged (81 against 46 canvases, p = 0.0024; "
                           "against seed 1: 46 to 46, p = 1")
    assert "seeds 0 and 1 of the budget: 46 to 81, p = 0.0024" in cell
    worse_seed = lucky.copy()
    worse_seed[:150] = False  # seed 1 misreads more: twice the budget beats both, not converged
    check = doubling_check(SimpleNamespace(**{**vars(two), "right": lambda index, canvas_seed=None:
                                              (forty, worse_seed)[index]}), runs(eighty, 0.0124, epochs=80))
    assert not check["converged"] and "reads more right than every seed: not converged" in _doubling_cell(check)
    assert check["fresh"]["more_right"] and "; on fresh canvases, reads more right than every seed there (81 " in \
        _doubling_cell(check)
    # the fresh canvases are shown beside the verdict, not in it: a gain there alone leaves the budget converged
    fresh_gain = SimpleNamespace(**{**vars(two), "right": lambda index, canvas_seed=None:
                                    (worse_seed if canvas_seed else (forty, lucky)[index])})
    check = doubling_check(fresh_gain, runs(eighty, 0.0124, epochs=80))
    assert check["converged"] and check["fresh"]["more_right"]
    assert [t["seed"] for t in check["fresh"]["tests"]] == [0, 1] and check["fresh"]["tests"][0]["only_b"] == 150
    cell = _doubling_cell(check)
    assert "counts as converged (" in cell and cell.endswith(
        "; on fresh canvases, reads more right than every seed there (150 against 0, p < 1e-6; against seed 1: "
        "150 to 0, p < 1e-6)")
    assert "no gain over every seed shown there" in _doubling_cell(doubling_check(two, runs(eighty, 0.0124, epochs=80)))

    def record_without_fresh(index, canvas_seed=None):  # a record scored before the fresh canvases were
        if canvas_seed is not None:
            raise ValueError("no results on the fresh canvases")
        return (forty, lucky)[index]
    check = doubling_check(SimpleNamespace(**{**vars(two), "right": record_without_fresh}), runs(eighty, 0.0124, epochs=80))
    assert check["fresh"] is None and "fresh" not in _doubling_cell(check)


def test_time_to_threshold_reads_the_learning_curve():
    curve = lambda accs: {"history": [{"epoch": e + 1, "train_seconds": 10.0 * (e + 1), "val_accuracy": a}
                                      for e, a in enumerate(accs)]}
    runs = SeedRuns(RAM, [curve([0.5, 0.91, 0.96]), curve([0.92, 0.93, 0.94]), curve([0.2, 0.3, 0.4])], [])
    at90 = time_to_threshold(runs, 0.90)
    assert (at90["reached"], at90["of"]) == (2, 3)
    assert at90["epochs"] == pytest.approx(1.5)
    at95 = time_to_threshold(runs, 0.95)
    assert (at95["reached"], at95["epochs"]) == (1, 3)
    assert np.isnan(time_to_threshold(runs, 0.99)["epochs"])


def test_readme_headline_block_is_replaced(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{HEADLINE_START}\nold table\n{HEADLINE_END}\noutro\n")
    update_readme(readme, "| new | table |", "reports/where_they_look.png")
    text = readme.read_text()
    assert "old table" not in text and "| new | table |" in text and text.startswith("intro") and "outro" in text
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="headline"):
        update_readme(readme, "x", "y")


def test_relative_variance_of_a_known_gradient_noise():
    from glimpse.gradient_noise import relative_variance

    # g = mu + N(0, 0.5^2 I) in 10 dimensions: trace of the covariance 10 * 0.25, ||mu||^2 = 4
    generator = torch.Generator().manual_seed(0)
    mu = torch.zeros(10, dtype=torch.float64)
    mu[0] = 2.0
    grads = mu + 0.5 * torch.randn(20_000, 10, generator=generator, dtype=torch.float64)
    assert relative_variance(grads) == pytest.approx(10 * 0.25 / 4.0, rel=0.05)
    assert relative_variance(0.5 * torch.randn(50, 10, generator=generator, dtype=torch.float64)) > 1


def test_a_run_tested_on_an_older_benchmark_is_scored_again(tmp_path):
    """Runs record the benchmark version their test error was measured on; the report scores a
    run of another version again on today's test canvases, by evaluate.py's code."""
    from glimpse.checkpoint import save_checkpoint
    from glimpse.commands import train
    from glimpse.evaluation import evaluate_checkpoint
    from glimpse.report.measurements import collect

    runs = tmp_path / "runs"
    assert train.main(["--preset", "cluttered60", "--mode", "full", "--full-arch", "fc", "--max-steps", "2",
                       "--data-dir", "bundled", "--run-dir", str(runs), "--run-name", "fc-seed0"]) == 0
    best = runs / "fc-seed0" / "best.pt"
    payload = load_checkpoint(best)
    assert payload["benchmark"] == 1
    collected = collect(FC, (0,), runs, "bundled", max_steps=2)
    assert collected.runs[0]["test_accuracy"] == payload["test_accuracy"]  # today's version: taken as recorded
    save_checkpoint(best, {**{k: v for k, v in payload.items() if k not in ("benchmark", "format")},
                           "test_accuracy": 0.0})
    rescored = collect(FC, (0,), runs, "bundled", max_steps=2).runs[0]["test_accuracy"]
    assert rescored == evaluate_checkpoint(best, data_dir="bundled", progress=False)["accuracy"] > 0.0


def test_a_run_of_another_budget_is_left_out(tmp_path):
    """A family whose budget is raised keeps its run names: its runs at the old budget are not read as
    the new one's (the report says it leaves them out), nor when --budget scales the epochs."""
    from dataclasses import replace

    from glimpse.commands import train
    from glimpse.report.settings import ReportSettings
    from glimpse.report.measurements import collect

    runs = tmp_path / "runs"
    assert train.main(["--preset", "cluttered60", "--mode", "full", "--full-arch", "fc", "--max-steps", "2",
                       "--epochs", "4", "--data-dir", "bundled", "--run-dir", str(runs), "--run-name", "fc-seed0"]) == 0
    assert len(collect(FC, (0,), runs, "bundled", epochs=4, max_steps=2).runs) == 1
    assert collect(FC, (0,), runs, "bundled", epochs=8, max_steps=2).runs == []
    settings = ReportSettings(runs, tmp_path / "out", (0,), "bundled", max_steps=2)
    assert len(settings.collect(replace(FC, epochs=4)).runs) == 1
    assert settings.collect(replace(FC, epochs=2)).runs == []
    assert len(replace(settings, budget=2.0).collect(replace(FC, epochs=2)).runs) == 1
    # a directory of the old budget gives way to a record of the new one
    from glimpse.checkpoint import load_checkpoint
    from glimpse.report.records import make_record, record_path, write_record

    payload = load_checkpoint(runs / "fc-seed0" / "best.pt")
    records = tmp_path / "records"
    records.mkdir()
    write_record(record_path(records, "fc-seed0"),
                 make_record({**payload, "train_config": {**payload["train_config"], "epochs": 8}},
                             {"test-v1": np.ones(3, bool)}, keep_weights=False))
    kept = collect(FC, (0,), runs, "bundled", records, epochs=8, max_steps=2).runs
    assert len(kept) == 1 and kept[0]["train_config"]["epochs"] == 8 and "right" in kept[0]
    assert len(collect(FC, (0,), runs, "bundled", records, epochs=4, max_steps=2).runs) == 1  # the directory


def test_a_smoke_test_s_capped_run_is_no_report_run_and_the_report_trains_it_on(tmp_path):
    """A run capped by --max-steps (report.py --train --max-steps N, a smoke test) is finished for a
    report with the same cap only; a report without it does not read it, trains it on to the end of its
    epochs (train.py resumes it), and refuses to adopt a capped checkpoint."""
    from glimpse.commands import train
    from glimpse.report.adoption import adopt_checkpoints
    from glimpse.report.settings import ReportSettings
    from glimpse.report.measurements import collect
    from glimpse.report.runs import RunRequest, finished_run, train_command

    runs = tmp_path / "runs"
    assert train.main(["--preset", "cluttered60", "--mode", "full", "--full-arch", "fc", "--max-steps", "2",
                       "--epochs", "4", "--data-dir", "bundled", "--run-dir", str(runs), "--run-name", "fc-seed0"]) == 0
    assert finished_run(runs / "fc-seed0", max_steps=2) is not None and finished_run(runs / "fc-seed0") is None
    assert collect(FC, (0,), runs, "bundled", epochs=4).runs == []
    command = train_command(RunRequest(FC, 0, 4), runs, threads=1)
    assert command[command.index("--resume") + 1] == str(runs / "fc-seed0")
    assert command[command.index("--max-steps") + 1] == "0"  # the cap lifted: it trains to the end
    settings = ReportSettings(runs, tmp_path / "out", (0,), "bundled")
    with pytest.raises(ValueError, match="--max-steps 2 \\(a capped smoke test\\)"):
        adopt_checkpoints(settings, [runs / "fc-seed0" / "best.pt"], [RunRequest(FC, 0, 4)])


def test_every_run_the_report_asks_for_is_a_command_train_accepts(tmp_path):
    """train.py refuses options its model does not use: every run of the report, the converged
    recipes, the glimpse sweep and the estimator runs included, names only options that apply."""
    from glimpse.report.experiments import ESTIMATED, ESTIMATOR_SAMPLES, MODELS, SWEPT, converged, sweep, with_samples
    from glimpse.report.runs import TRAIN, RunRequest, train_command
    from glimpse.training.config import build_parser, config_from_args

    experiments = [*MODELS, *map(converged, MODELS), *(e for s in SWEPT for e in sweep(s)),
                   *(with_samples(e, k) for e in ESTIMATED for k in ESTIMATOR_SAMPLES)]
    for experiment in experiments:
        argv = train_command(RunRequest(experiment, 0, 1), tmp_path, threads=1, data_dir="bundled")
        config = config_from_args(build_parser().parse_args(argv[1 + len(TRAIN):]))  # after python -m ...
        assert config.epochs == 1 and config.run_name == experiment.run_name(0)


def test_the_generated_files_in_the_repository_keep_no_machine_paths():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    generated = [*root.glob("reports/**/*.md"), root / "checkpoints" / "scores.json", root / "docs" / "leaderboard.md"]
    texts = {p: p.read_text() for p in generated}
    from glimpse.report.records import read_record  # the kept records too, all but their weights and results
    texts.update({p: repr({k: v for k, v in read_record(p).items() if k not in ("model_state", "right")})
                  for p in root.glob("reports/**/records/*.pt")})
    found = {str(p.relative_to(root)): re.findall(r"/(?:work|root|home|tmp|Users)/[\w./-]+", text)
             for p, text in texts.items()}
    assert not {name: paths for name, paths in found.items() if paths}


def test_paired_tests_pair_runs_by_their_seed_not_their_place():
    """A missing seed shifts a model's runs: seed 1 of A must still meet seed 1 of B."""
    from types import SimpleNamespace

    from glimpse.report.measurements import paired_tests
    from glimpse.stats import paired_over_seeds

    rng = np.random.default_rng(0)
    right = {seed: rng.random(500) < 0.9 for seed in range(3)}

    def model(name, seeds, shift):
        return SimpleNamespace(experiment=SimpleNamespace(name=name, label=name), seeds=seeds,
                               right=lambda index: np.roll(right[seeds[index]], shift))
    a, b = model("a", [0, 1, 2], 0), model("b", [1, 2], 3)
    (test,) = paired_tests([a, b])
    assert test["seeds"] == 2
    expected = paired_over_seeds([right[1], right[2]], [np.roll(right[1], 3), np.roll(right[2], 3)])
    assert (test["only_a"], test["only_b"], test["p"]) == (expected["only_a"], expected["only_b"], expected["p"])


def test_ctrl_c_during_report_training_stops_the_report_and_says_it_resumes(tmp_path, monkeypatch, capsys):
    """Ctrl-C reaches the training runs too; a run that stopped on it is interrupted, not failed."""
    import subprocess

    from glimpse.report import runs

    monkeypatch.setattr(runs.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 130))
    with pytest.raises(KeyboardInterrupt):
        runs.train_missing([runs.RunRequest(FC, 0, 1)], tmp_path)
    assert "fc-seed0: interrupted" in capsys.readouterr().err
    assert report.main(["--train", "--models", "fc", "--seeds", "1", "--runs", str(tmp_path), "--out",
                        str(tmp_path / "out"), "--data-dir", "bundled", "--glimpses", "", "--estimators", ""]) == 130
    assert "the same command goes on from there" in capsys.readouterr().err


def test_the_sensor_section_names_a_model_its_doubling_check_did_not_settle():
    """A row with a seed that read more right at twice the epochs holds its budget's error: the
    section's verdicts say so, with the doubled error and its seed."""
    from types import SimpleNamespace

    from glimpse.report.document import _sensor_against_gradient

    def group(experiment, kind, errors):
        return SimpleNamespace(experiment=experiment, runs=[{"kind": kind, "train_config": {}}],
                               test_errors=np.array(errors), fresh_errors=lambda: [])

    measured = {"canvas_pixels_touched": 3600, "sensor_values": 3600, "flops": 1e6,
                "train_images_per_second": 100.0, "eval_images_per_second": 400.0}
    mean, sat = by_name("sat-mean"), by_name("sat")
    r = SimpleNamespace(groups=[group(mean, "sat-mean", [0.0175]), group(sat, "sat", [0.0165])],
                        measured={mean.name: measured, sat.name: measured}, tests=[], n_test=10_000,
                        doubling={mean.name: [{"converged": True, "doubled_error": 0.0174, "seed": 0},
                                              {"converged": False, "doubled_error": 0.0135, "doubled_epochs": 81,
                                               "seed": 1}],
                                  sat.name: [{"converged": True, "doubled_error": 0.016, "doubled_epochs": 80, "seed": 0}]})
    text = "\n".join(_sensor_against_gradient(r))  # one doubled seed of two that read more right is enough
    assert "Not converged by the doubling check" in text and f"{mean.label} (1.35 % at 81 epochs, seed 1)" in text
    assert f"{sat.label} (" not in text.split("Not converged by the doubling check")[1]
    r.doubling[mean.name] = [{"converged": True, "doubled_error": 0.0174, "seed": 0}]
    assert "Not converged" not in "\n".join(_sensor_against_gradient(r))


def test_the_sensor_section_gives_every_pair_and_each_row_against_the_first():
    """A pair with no difference shown is named with its counts, not hidden behind "no other pair";
    each row gives its test against the first row from its own side; rows with fewer seeds are named."""
    from types import SimpleNamespace

    from glimpse.report.document import _sensor_against_gradient

    def group(experiment, kind, errors):
        return SimpleNamespace(experiment=experiment, runs=[{"kind": kind, "train_config": {}}] * len(errors),
                               test_errors=np.array(errors), fresh_errors=lambda: [])

    measured = {"canvas_pixels_touched": 3600, "sensor_values": 3600, "flops": 1e6,
                "train_images_per_second": 100.0, "eval_images_per_second": 400.0}
    ram, sat, mean = by_name("ram"), by_name("sat"), by_name("sat-mean")
    tests = [{"a": ram, "b": sat, "only_a": 117, "only_b": 252, "p_holm": 1e-7},
             {"a": ram, "b": mean, "only_a": 140, "only_b": 130, "p_holm": 0.78},
             {"a": sat, "b": mean, "only_a": 140, "only_b": 118, "p_holm": 0.85}]
    r = SimpleNamespace(groups=[group(ram, "ram", [0.0202, 0.0203]), group(sat, "sat", [0.0133, 0.0137]),
                                group(mean, "sat-mean", [0.0135])],
                        measured={e.name: measured for e in (ram, sat, mean)}, tests=tests, n_test=10_000, doubling={})
    text = "\n".join(_sensor_against_gradient(r))
    assert f"- **{sat.label}** reads more right than {ram.label} (252 to 117, Holm p < 1e-6)." in text
    assert (f"- **No difference shown:** {ram.label} and {mean.label} (140 to 130, Holm p = 0.78); "
            f"{sat.label} and {mean.label} (140 to 118, Holm p = 0.85).") in text
    rows = {line.split(" | ")[2]: line.split(" | ") for line in text.splitlines()
            if line.startswith("| ") and " | 3.60 k | " in line}
    assert rows[ram.label][-2] == "–"  # the reference itself
    assert rows[sat.label][-2] == "252 / 117, p < 1e-6" and rows[mean.label][-2] == "130 / 140, p = 0.78"
    assert rows[sat.label][-3] == "400" and rows[mean.label][-1] == "1 |"
    assert f"With fewer seeds than the other rows: {mean.label}." in text


def test_the_headline_interval_counts_canvases_not_canvases_times_seeds():
    """Seeds misread the same hard canvases: the interval of their mean error has the canvases as n."""
    from glimpse.report.document import _error_cell
    from glimpse.stats import format_interval

    cell = _error_cell(np.array([0.0200, 0.0210]), 10_000)
    assert cell == f"2.05 ± 0.07 ({format_interval(205, 10_000)})"
    assert format_interval(205, 10_000) != format_interval(410, 20_000)  # the old, too narrow pooling
    assert _error_cell(np.array([0.02]), 10_000) == f"2.00 ({format_interval(200, 10_000)}; 1 seed)"


def test_a_model_or_count_named_twice_is_taken_once():
    """--models fc,fc would train fc-seed0 twice at once (one failing on the other's lock) and pair it with
    itself; --glimpses 2,2 and --estimators 2,2 likewise."""
    args = report.build_parser().parse_args(["--models", "ram,fc,ram", "--glimpses", "2,2", "--estimators", "2,4,2"])
    report.check(args)
    assert [e.name for e in args.models] == ["ram", "fc"] and args.glimpses == (2,) and args.estimators == (2, 4)


def test_runs_trained_on_other_digits_are_refused_not_mixed(tmp_path):
    """A report (or --adopt) on the bundled subset must not score or read runs trained on full MNIST beside
    its own: the test sets differ. The digits' hash in each run's provenance says which it was trained on."""
    from envs.data import load_mnist
    from glimpse.checkpoint import save_checkpoint
    from glimpse.commands import train
    from glimpse.report.adoption import adopt_checkpoints
    from glimpse.report.build import check_same_digits
    from glimpse.report.settings import ReportSettings
    from glimpse.report.runs import RunRequest

    runs = tmp_path / "runs"
    assert train.main(["--preset", "cluttered60", "--mode", "full", "--full-arch", "fc", "--max-steps", "2",
                       "--epochs", "4", "--data-dir", "bundled", "--run-dir", str(runs), "--run-name", "fc-seed0"]) == 0
    best = runs / "fc-seed0" / "best.pt"
    payload = load_checkpoint(best)
    bundled = load_mnist("bundled")
    check_same_digits(bundled, [payload], "it")  # its own digits: fine
    elsewhere = {**payload, "provenance": {**payload["provenance"], "data_sha256": "f" * 64}}
    with pytest.raises(ValueError, match="trained on other digits \\(sha256 ffffffffffff\\)"):
        check_same_digits(bundled, [elsewhere], "it")
    save_checkpoint(best, {k: v for k, v in elsewhere.items() if k != "format"})
    settings = ReportSettings(tmp_path / "other-runs", tmp_path / "out", (0,), "bundled", max_steps=2)
    with pytest.raises(ValueError, match="give the --data-dir they were trained on"):
        adopt_checkpoints(settings, [best], [RunRequest(FC, 0, 4)])
    assert not (tmp_path / "out").exists()


def test_a_half_trained_run_of_another_budget_is_not_resumed_at_this_one(tmp_path, interrupt_at_step):
    """An interrupted run keeps the cosine schedule of the epochs it started with; resumed under another
    --budget it would switch schedules midway and pass for a clean run of the new budget."""
    from glimpse.commands import train
    from glimpse.report.runs import RunRequest, train_missing

    interrupt_at_step(3)
    assert train.main(["--preset", "cluttered60", "--mode", "full", "--full-arch", "fc", "--epochs", "4",
                       "--checkpoint-every", "2", "--data-dir", "bundled", "--run-dir", str(tmp_path),
                       "--run-name", "fc-seed0"]) == 130
    interrupt_at_step(None)
    with pytest.raises(ValueError, match="started for another budget: fc-seed0 \\(4 epochs, the budget asks 8\\)"):
        train_missing([RunRequest(FC, 0, 8)], tmp_path)


def test_a_run_another_process_trains_is_left_to_it_not_failed(tmp_path, capsys):
    """Two reports on one --runs folder (or a report beside a train.py --resume): a run whose directory
    another live process holds is left to that process, neither trained twice nor counted as failed."""
    import os
    from glimpse.report.runs import RunRequest, train_missing
    from glimpse.training.rundir import RunDirectory, live_holder

    runs = tmp_path / "runs"
    assert live_holder(runs / "fc-seed0") is None  # no directory, no lock
    held = RunDirectory(runs / "fc-seed0").acquire()  # this process stands for the other one
    try:
        assert live_holder(runs / "fc-seed0") == str(os.getpid())
        assert train_missing([RunRequest(FC, 0, 4)], runs, max_steps=2, data_dir="bundled") == ([], ["fc-seed0"])
        assert "fc-seed0: being trained by another process" in capsys.readouterr().err
        assert not (runs / "fc-seed0" / "best.pt").exists() and not (runs / "fc-seed0.log").exists()
    finally:
        held.release()
    assert live_holder(runs / "fc-seed0") is None  # released: a later report trains it


def test_a_run_of_a_model_its_recipe_no_longer_builds_is_left_out(tmp_path, capsys):
    """A run (or record) made before a family's model changed under the same recipe (the differentiable
    retina's "where" gradient, 2026-12-01) is not this version's run of the recipe: the report leaves
    it out with a warning and --adopt refuses it."""
    from glimpse.checkpoint import save_checkpoint
    from glimpse.cli import option_flags
    from glimpse.commands import train
    from glimpse.report.adoption import adopt_checkpoints
    from glimpse.report.settings import ReportSettings
    from glimpse.report.measurements import collect
    from glimpse.report.runs import RunRequest

    diff = by_name("ram-diff")
    runs = tmp_path / "runs"
    assert train.main([*option_flags(diff.train_options(0, 4)), "--max-steps", "2", "--data-dir", "bundled",
                       "--run-dir", str(runs), "--run-name", diff.run_name(0)]) == 0
    assert len(collect(diff, (0,), runs, "bundled", epochs=4, max_steps=2).runs) == 1
    best = runs / diff.run_name(0) / "best.pt"
    payload = load_checkpoint(best)
    old = {k: v for k, v in payload["model_config"].items() if k != "where_gradient"}  # as runs before the field
    save_checkpoint(best, {**{k: v for k, v in payload.items() if k != "format"}, "model_config": old})
    capsys.readouterr()
    assert collect(diff, (0,), runs, "bundled", epochs=4, max_steps=2).runs == []
    assert "it trained a model with where_gradient=False, which its recipe no longer builds" in capsys.readouterr().err
    settings = ReportSettings(tmp_path / "other", tmp_path / "out", (0,), "bundled", max_steps=2)
    with pytest.raises(ValueError, match="where_gradient=False, which its recipe no longer builds"):
        adopt_checkpoints(settings, [best], [RunRequest(diff, 0, 4)])


def test_the_report_warns_when_it_builds_without_runs_another_process_holds(tmp_path, monkeypatch, capsys):
    """``report.py --train`` beside another process training one of its runs: the report is built
    without that run (listed as not trained), and the command says so at its end rather than
    ending as if every run were in."""
    from glimpse.commands import report

    monkeypatch.setattr(report, "train_missing", lambda *args, **kwargs: ([], ["fc-seed0"]))
    monkeypatch.setattr(report, "build_report", lambda settings: tmp_path / "out" / "compare.md")
    assert report.main(["--train", "--models", "fc", "--seeds", "1", "--data-dir", "bundled",
                        "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "1 run(s) were being trained by another process and are reported as not trained: fc-seed0" in err


def test_a_run_of_another_recipe_under_a_report_run_s_name_is_not_taken_for_it(tmp_path, capsys):
    """A family's recipe that changed since a run trained (another --lr, at the same epochs), a run in
    stages, or one resumed with another --epochs is not the recipe's run: the report leaves it out
    with a warning, and --train refuses to count or resume it."""
    from glimpse.checkpoint import save_checkpoint
    from glimpse.cli import option_flags
    from glimpse.commands import train
    from glimpse.report.measurements import collect
    from glimpse.report.runs import RunRequest, other_recipe, train_command, train_missing

    runs = tmp_path / "runs"
    request = RunRequest(RAM, 0, RAM.epochs)
    options = RAM.train_options(0, RAM.epochs)
    assert train.main([*option_flags({**options, "lr": 0.5 * (options.get("lr") or 1e-3)}), "--max-steps", "2",
                       "--data-dir", "bundled", "--run-dir", str(runs), "--run-name", request.name]) == 0
    payload = load_checkpoint(runs / request.name / "best.pt")
    assert "trained as `python train.py" in other_recipe(payload, request) and "--lr" in other_recipe(payload, request)
    own = {**payload, "train_config": {**payload["train_config"], "lr": resolve_lr(options)}}
    assert other_recipe(own, request) is None
    assert other_recipe({**own, "budget_changes": [{"step": 1, "epochs": 3}]}, request).startswith("resumed with")
    staged = {**own, "earlier_stages": [{"train_config": own["train_config"], "train_seconds": 1.0}]}
    assert other_recipe(staged, request) == "trained in 2 stages"
    with pytest.raises(ValueError, match=f"not their recipe's runs: {request.name}: trained as"):
        train_missing([request], runs, max_steps=2, data_dir="bundled")
    capsys.readouterr()
    assert collect(RAM, (0,), runs, max_steps=2).runs == []
    assert f"left out {request.name}: trained as" in capsys.readouterr().err
    # an interrupted run of another recipe is not resumed as this one's either
    (runs / request.name / "best.pt").unlink()
    with pytest.raises(ValueError, match=r"trained as .* \(interrupted\)"):
        train_missing([request], runs, max_steps=2, data_dir="bundled")
    # a run resumed by the report reads the digits it is told to, as a new one does
    assert train_command(request, runs, threads=1, data_dir="DIGITS")[-2:] == ["--data-dir", "DIGITS"]
    save_checkpoint(runs / request.name / "last.pt", own)
    assert train_command(request, runs, threads=1, data_dir="DIGITS")[-2:] == ["--data-dir", "DIGITS"]


def resolve_lr(options: dict) -> float:
    from glimpse.training.config import resolve_config

    return resolve_config(options).lr


def test_an_adopted_record_finds_its_file_from_any_working_directory(tmp_path, monkeypatch):
    """A record names the shipped file it was adopted from relative to the clone's root; from another
    directory (the installed glimpse-report, say) the file and its weights are found all the same."""
    from pathlib import Path

    from glimpse.report.records import CLONE, adopted_file_unchanged, adopted_source, read_record

    record = read_record(CLONE / "reports" / "converged" / "records" / "ram-converged-seed0.pt")
    assert record["adopted_from"] == "checkpoints/ram-cluttered60.pt" and "model_state" not in record
    monkeypatch.chdir(tmp_path)
    assert adopted_source(record) == CLONE / "checkpoints" / "ram-cluttered60.pt" and adopted_file_unchanged(record)
    assert adopted_source({**record, "adopted_from": "checkpoints/none-such.pt"}) is None
    assert adopted_source({"adopted_from": None}) is None and not Path("checkpoints").exists()


def test_a_record_is_kept_anew_when_its_run_s_best_checkpoint_is_another(tmp_path, capsys):
    """A record names the best.pt it was made from (sha256): a run of the same name trained again is
    recorded again, even where the old record's file is the newer (a checkout, a copy keeping times);
    --no-report keeps the records of the finished runs and builds nothing."""
    import os

    from glimpse.commands import train
    from glimpse.cli import option_flags
    from glimpse.report.records import file_sha256, read_record

    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--runs", str(runs), "--out", str(out), "--seeds", "1", "--models", "fc", "--glimpses", "", "--estimators",
            "", *TINY]

    def trained():
        assert train.main([*option_flags(FC.train_options(0, FC.epochs)), "--max-steps", "2", "--data-dir", "bundled",
                           "--run-dir", str(runs), "--run-name", "fc-seed0"]) == 0
    trained()
    assert report.main([*argv, "--no-report"]) == 0 and not (out / "compare.md").exists()
    record = out / "records" / "fc-seed0.pt"
    assert read_record(record)["best_sha256"] == file_sha256(runs / "fc-seed0" / "best.pt")
    for path in (runs / "fc-seed0").iterdir():
        path.unlink()
    (runs / "fc-seed0").rmdir()
    trained()  # another run under the name (another file: its times differ); the old record made newer than it
    assert read_record(record)["best_sha256"] != file_sha256(runs / "fc-seed0" / "best.pt")
    os.utime(record, ns=(2 * 10**18, 2 * 10**18))
    assert report.main([*argv, "--no-report"]) == 0
    assert read_record(record)["best_sha256"] == file_sha256(runs / "fc-seed0" / "best.pt")
