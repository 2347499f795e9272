"""glimpse.benchmark: any model or agent scored on the lab's canvases, with the protocol that makes
its number comparable, by the same rules evaluate.py scores the lab's checkpoints with."""
import json
import sys
from pathlib import Path

import pytest
import torch

from glimpse import benchmark
from glimpse.benchmark import score, score_agent
from glimpse.checkpoint import load_model
from glimpse.commands import evaluate
from glimpse.evaluation import evaluate_checkpoint

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 200


def test_a_whole_canvas_model_is_scored_as_evaluate_py_scores_a_checkpoint():
    model, payload = load_model(ROOT / "checkpoints" / "sat-cluttered60.pt")
    result = score(lambda canvases: model(canvases)["logits"], "cluttered60", data_dir="bundled", limit=LIMIT,
                   model="sat")
    lab = evaluate_checkpoint(ROOT / "checkpoints" / "sat-cluttered60.pt", data_dir="bundled", limit=LIMIT,
                              per_canvas=True, progress=False)
    assert (result.right == lab["right"]).all() and result.error == pytest.approx(lab["error"])
    assert result.set_hash == lab["canvas_hash"] and result.benchmark == lab["benchmark"] == 1
    saved = result.to_dict()
    assert saved["reads"] == "whole canvas" and saved["pixels_read_per_image"] == 60 * 60
    assert saved["trajectories_per_image"] == 1 and saved["glimpses_per_image"] is None and "right" not in saved
    low, high = saved["error_interval"]
    assert low <= saved["error"] <= high and saved["n"] == LIMIT and saved["split"] == "test"


class RecurrentAgent:
    """A RAM checkpoint driven as an outside agent: it sees the env's observations only."""

    def __init__(self, model):
        self.model = model

    def reset(self, n):
        self.state = self.model.initial_state()

    def act(self, observation):
        out = self.model(observation["glimpse"], observation["location"], self.state)
        self.state = out.state
        return {"location": out.mean.clamp(-1, 1), "label": out.logits.argmax(-1)}


def test_an_agent_reads_the_same_canvases_through_the_env_and_its_glimpses_are_counted():
    model, _ = load_model(ROOT / "checkpoints" / "ram-cluttered60.pt")
    with torch.no_grad():
        result = score_agent(RecurrentAgent(model), "cluttered60", data_dir="bundled", limit=LIMIT, batch_size=64)
    lab = evaluate_checkpoint(ROOT / "checkpoints" / "ram-cluttered60.pt", data_dir="bundled", limit=LIMIT,
                              per_canvas=True, progress=False)
    assert (result.right == lab["right"]).all()  # the policy mean, as evaluate.py follows it
    assert result.set_hash == lab["canvas_hash"]
    assert result.reads == "glimpses" and result.glimpses_per_image == 6
    assert result.pixels_read_per_image == 6 * 48 * 48  # under the widest box of each glimpse


@pytest.mark.parametrize("output,match", [
    (lambda x: torch.zeros(len(x), 9), r"floating logits of shape \(50, 10\), got torch.float32 \(50, 9\)"),
    (lambda x: torch.zeros(len(x), 10, dtype=torch.int64), "floating logits"),
    (lambda x: torch.full((len(x), 10), float("nan")), "NaN or infinite"),
    (lambda x: torch.zeros(len(x), 10, device="meta"), "on cpu"),
    (lambda x: [0] * len(x), "must return a tensor"),
])
def test_a_model_that_returns_the_wrong_thing_is_told_what_was_expected(output, match):
    with pytest.raises(ValueError, match=match):
        score(output, "cluttered60", data_dir="bundled", limit=50)


def test_evaluate_py_scores_an_outside_model_and_pairs_it_with_a_checkpoint(tmp_path, capsys, monkeypatch):
    module = tmp_path / "outside.py"
    module.write_text("import torch\n\ndef predict(canvases):\n    return torch.zeros(len(canvases), 10)\n\n"
                      "def wrong(canvases):\n    return torch.zeros(len(canvases), 3)\n")
    argv = ["--model", f"{module}:predict", "--preset", "cluttered60", "--data-dir", "bundled", "--limit", str(LIMIT)]
    assert evaluate.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["task"] == "cluttered60" and result["n"] == LIMIT and result["reads"] == "whole canvas"
    assert evaluate.main([*argv, "--json", "--against", str(ROOT / "checkpoints" / "ram-cluttered60.pt")]) == 0
    paired = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["against"]
    assert paired["only_this"] == 0 and paired["only_against"] > 100 and paired["p"] < 1e-6
    for bad, match in ((["--model", f"{module}:wrong"], "shape"), (["--model", f"{module}:missing"], "no callable"),
                       (["--model", "no_such_module:f"], "cannot import"), (["--model", "predict"], "MODULE:CALLABLE"),
                       (["--checkpoint", str(ROOT / "checkpoints" / "ram-cluttered60.pt"), "--model",
                         f"{module}:predict"], "one of them")):
        assert evaluate.main([*bad, "--preset", "cluttered60", "--data-dir", "bundled", "--limit", "20"]) == 2
        assert match in capsys.readouterr().err
    assert evaluate.main(["--model", f"{module}:predict", "--data-dir", "bundled"]) == 2
    assert "needs --preset" in capsys.readouterr().err
    # a model file imports the modules beside it, as `python FILE` would; one that exits on import is an error
    (tmp_path / "helper_for_outside.py").write_text("import torch\n\ndef zeros(n):\n    return torch.zeros(n, 10)\n")
    (tmp_path / "uses_helper.py").write_text("from helper_for_outside import zeros\n\ndef predict(canvases):\n"
                                             "    return zeros(len(canvases))\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit('bye')\n")
    assert evaluate.main(["--model", f"{tmp_path / 'uses_helper.py'}:predict", *argv[2:]]) == 0
    assert evaluate.main(["--model", f"{tmp_path / 'exits.py'}:predict", *argv[2:]]) == 2
    assert "cannot import" in capsys.readouterr().err and str(tmp_path) not in sys.path
    # a checkpoint of other canvases is refused before the outside model is scored
    monkeypatch.setattr(benchmark, "score", lambda *a, **k: pytest.fail("scored before refusing"))
    assert evaluate.main([*argv, "--against", str(ROOT / "checkpoints" / "ram-mnist28.pt")]) == 2
    assert "reads other canvases than --preset cluttered60" in capsys.readouterr().err


def test_the_leaderboard_page_is_generated_from_the_files_and_up_to_date(tmp_path):
    from glimpse import leaderboard

    assert leaderboard.write(check_only=True), "docs/leaderboard.md is stale: python scripts/leaderboard.py --write"
    text = leaderboard.PAGE.read_text()
    assert "ram-cluttered60.pt" in text and "DRAW, 8 glimpses" in text and "## Adding a row" in text
    # every shipped checkpoint is listed under its task, whatever hyphens its family's name holds
    lab = leaderboard.lab_rows(json.loads(leaderboard.SCORES.read_text()))
    assert {row["task"] for row in lab} <= set(leaderboard.TASKS)
    assert leaderboard.task_of("ram-diff-cluttered60.pt", "ram-diff") == "cluttered60"
    with pytest.raises(ValueError, match="named ram-TASK.pt"):
        leaderboard.task_of("sat-cluttered60.pt", "ram")
    # a saved result on the bundled digits, 50 canvases, is refused by name and why
    result = score(lambda x: torch.zeros(len(x), 10), "cluttered60", data_dir="bundled", limit=50, model="zeros")
    result.save(tmp_path / "zeros.json")
    with pytest.raises(ValueError, match="zeros.json: scored on the bundled subset's digits"):
        leaderboard.page(json.loads(leaderboard.SCORES.read_text()), results_dir=tmp_path)
    saved = json.loads((tmp_path / "zeros.json").read_text())
    (tmp_path / "zeros.json").write_text(json.dumps({**saved, "mnist_subset": False}))
    with pytest.raises(ValueError, match="zeros.json: 50 canvases, not the task's 10,000"):
        leaderboard.page(json.loads(leaderboard.SCORES.read_text()), results_dir=tmp_path)
    (tmp_path / "zeros.json").write_text(json.dumps({**saved, "mnist_subset": False, "canvas_seed": 7}))
    with pytest.raises(ValueError, match="of seed 7; the board's are the fixed test canvases"):
        leaderboard.page(json.loads(leaderboard.SCORES.read_text()), results_dir=tmp_path)
    # a result on the whole fixed set of full MNIST (the example's, committed) is a row of its task; one
    # altered is refused by name and why
    real = json.loads((ROOT / "benchmarks" / "results" / "small-cnn-1000-steps.json").read_text())

    def board_with(result):
        (tmp_path / "zeros.json").write_text(json.dumps(result))
        return leaderboard.page(json.loads(leaderboard.SCORES.read_text()), results_dir=tmp_path)
    for change, why in (({"task_settings": {**real["task_settings"], "n_clutter": 0}},
                         r"zeros.json: scored with other canvases than cluttered60's: n_clutter 0 \(the task's 4\)"),
                        ({"task": "translated60"}, "task 'translated60' .*: the board's tasks are"),
                        ({"task": "custom", "task_settings": {**real["task_settings"], "n_clutter": 5}},
                         "task 'custom' .*n_clutter 5.*: the board's tasks are"),
                        ({"task_settings": {}}, "records no task settings"),
                        ({"set_hash": "0" * 16}, "hash 0000000000000000 is not that of cluttered60's fixed test"),
                        ({"error": 0.001}, r"its error 0.10 % is not the 1,264 canvases its right_bits read wrong"),
                        ({"right_bits": real["right_bits"][:40]}, "bits, not one per canvas"),
                        ({"right_bits": "not base64!"}, "right_bits are not base64"),
                        ({"right_bits": None, "split": None}, "it has no split")):
        result = {k: v for k, v in {**real, **change}.items() if v is not None}
        with pytest.raises(ValueError, match=why):
            board_with(result)
    for text, why in (("[1, 2]", r"not a saved benchmark result \(a JSON list, not an object\)"),
                      ("{nope", "not readable as JSON")):
        (tmp_path / "zeros.json").write_text(text)
        with pytest.raises(ValueError, match=f"zeros.json: {why}"):
            leaderboard.page(json.loads(leaderboard.SCORES.read_text()), results_dir=tmp_path)
    row = next(line for line in board_with({**real, "model": "zeros"}).splitlines() if line.startswith("| zeros |"))
    assert "12.64 (" in row and real["set_hash"] in row and "its own sensor" not in row
    # an agent with its own glimpse settings reads the task's canvases: a row of the task, its sensor named
    agent = {**real, "model": "zeros", "task": "custom", "task_settings": {**real["task_settings"], "n_glimpses": 8}}
    row = next(line for line in board_with(agent).splitlines() if line.startswith("| zeros |"))
    assert "its own sensor: n_glimpses 8 (the task's 6)" in row
    # lab scores of another benchmark version do not stand beside this one's
    with pytest.raises(ValueError, match="holds benchmark v0 scores, not v1"):
        leaderboard.lab_rows({**json.loads(leaderboard.SCORES.read_text()), "benchmark": 0})


def test_the_bring_your_own_model_example_trains_and_scores(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("score_a_cnn", ROOT / "examples" / "score_a_cnn.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(["--steps", "80", "--limit", "200", "--save", str(tmp_path / "cnn.json")])
    assert result.n == 200 and result.error < 0.75  # it learns: chance reads 90 % wrong, 80 steps about 59 %
    assert json.loads((tmp_path / "cnn.json").read_text())["model"].startswith("small torchvision CNN")
    for bad in (["--limit", "0"], ["--data-dir", str(tmp_path / "nowhere")]):  # refused before it trains
        with pytest.raises(SystemExit) as exit:
            example.main(bad)
        assert exit.value.code == 2


def test_an_agent_s_score_repeats_where_the_first_glimpse_falls_at_random():
    class Random:
        def act(self, observation):  # stays where it is; answers from what it sees
            return {"location": observation["location"],
                    "label": (observation["glimpse"].flatten(1).sum(1) * 7).long() % 10}

    task = {"canvas_size": 60, "n_clutter": 4, "glimpse_size": 12, "n_scales": 3, "n_glimpses": 2,
            "first_location": "random"}
    a, b = (score_agent(Random(), task, data_dir="bundled", limit=100, batch_size=40) for _ in range(2))
    assert (a.right == b.right).all() and a.task == "custom"
    # and does not hang on the batch size: each canvas keeps its first glimpse
    c = score_agent(Random(), task, data_dir="bundled", limit=100, batch_size=100)
    assert (a.right == c.right).all()


def test_a_preset_s_saved_settings_keep_its_name():
    """A result stores every setting (the defaults written out); scoring with them again is the
    preset's task, not a custom one, so the leaderboard compares it. A changed setting is custom."""
    from envs.task import TASKS_AS_SHIPPED
    from glimpse.benchmark import benchmark_task

    for preset in ("mnist28", "cluttered60", "cluttered100", "multi100"):
        name, settings = benchmark_task(preset)
        assert settings != TASKS_AS_SHIPPED[preset]  # the defaults written out
        assert benchmark_task(settings) == (preset, settings)
    assert benchmark_task({**benchmark_task("cluttered60")[1], "n_clutter": 5})[0] == "custom"


def test_a_module_is_scored_in_eval_mode_and_left_as_it_was():
    """Batch norm in training mode would score each batch by its own statistics (the error would
    depend on the batch size) and move the running ones; the benchmark scores in eval mode."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.BatchNorm2d(1), torch.nn.Flatten(), torch.nn.Linear(60 * 60, 10))
    net.train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    errors = [score(net, "cluttered60", data_dir="bundled", limit=LIMIT, batch_size=b).right for b in (7, 200)]
    assert (errors[0] == errors[1]).all() and net.training
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())


def test_the_saved_protocol_rebuilds_a_custom_task():
    custom = {"canvas_size": 40, "n_clutter": 2, "centred_digit": False}
    result = score(lambda canvases: torch.zeros(len(canvases), 10), custom, data_dir="bundled", limit=20)
    saved = json.loads(json.dumps(result.to_dict()))
    assert saved["task"] == "custom" and saved["mnist_subset"] is True
    again = score(lambda canvases: torch.zeros(len(canvases), 10), saved["task_settings"], data_dir="bundled",
                  limit=20)
    assert again.set_hash == result.set_hash


def test_an_outside_module_is_found_in_the_current_directory_and_a_broken_one_is_named(tmp_path, monkeypatch, capsys):
    """As the installed glimpse-evaluate runs: the current directory is not on sys.path."""
    import sys

    (tmp_path / "mine_here.py").write_text("import torch\n\ndef predict(x):\n    return torch.zeros(len(x), 10)\n")
    (tmp_path / "broken_here.py").write_text("def predict(x) return x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    args = ["--preset", "cluttered60", "--data-dir", "bundled", "--limit", "20"]
    assert evaluate.main(["--model", "mine_here:predict", *args]) == 0
    capsys.readouterr()
    assert evaluate.main(["--model", "broken_here:predict", *args]) == 2
    assert "cannot import broken_here (SyntaxError" in capsys.readouterr().err


def test_a_function_whose_answers_depend_on_the_batch_is_refused():
    """A function that wraps a batch norm in training mode scores differently at each batch size:
    the benchmark refuses it rather than print a number that hangs on --batch-size."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 5, stride=4), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                              torch.nn.LazyLinear(10))
    net(torch.zeros(2, 1, 60, 60))
    with pytest.raises(ValueError, match="depend on the batch they come in"):
        score(lambda canvases: net(canvases), "cluttered60", data_dir="bundled", limit=64, batch_size=32)
    net.eval()  # the same function with the module in eval mode is scored
    assert score(lambda canvases: net(canvases), "cluttered60", data_dir="bundled", limit=64, batch_size=32).n == 64


def test_a_saved_result_keeps_which_canvases_it_read_right_and_pairs_later(tmp_path):
    from glimpse.benchmark import BenchmarkResult, paired

    zeros = score(lambda x: torch.zeros(len(x), 10), "cluttered60", data_dir="bundled", limit=77)
    ones = score(lambda x: torch.nn.functional.one_hot(torch.ones(len(x), dtype=torch.long), 10).float(),
                 "cluttered60", data_dir="bundled", limit=77)
    zeros.save(tmp_path / "zeros.json")
    again = BenchmarkResult.load(tmp_path / "zeros.json")
    assert (again.right == zeros.right).all() and again.to_dict() == zeros.to_dict()
    test = paired(again, ones)
    assert test["only_a"] == int(zeros.right.sum()) and test["only_b"] == int(ones.right.sum())
    other = score(lambda x: torch.zeros(len(x), 10), "cluttered60", data_dir="bundled", limit=76)
    with pytest.raises(ValueError, match="read other canvases"):
        paired(zeros, other)


def test_a_changed_preset_a_failing_model_and_the_json_line(tmp_path, monkeypatch, capsys):
    """A preset changed in the scoring process is refused by name (its canvases would be another
    task's under the preset's name); a model that raises is bad input (exit 2, no traceback); and
    evaluate.py's --json line loads as a result that can be paired."""
    import envs
    from glimpse.benchmark import BenchmarkResult, paired
    from glimpse.commands import evaluate

    monkeypatch.setitem(envs.TASKS, "cluttered60", {**envs.TASKS["cluttered60"], "n_clutter": 0})
    with pytest.raises(ValueError, match=r"TASKS\['cluttered60'\] was changed in this process"):
        score(lambda x: torch.zeros(len(x), 10), "cluttered60", data_dir="bundled", limit=5)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"the model, given canvases \(5, 1, 60, 60\), raised RuntimeError: boom"):
        score(lambda x: (_ for _ in ()).throw(RuntimeError("boom")), "cluttered60", data_dir="bundled", limit=5)
    with pytest.raises(torch.OutOfMemoryError):  # the machine's limit, not bad input
        score(lambda x: (_ for _ in ()).throw(torch.OutOfMemoryError("out")), "cluttered60", data_dir="bundled",
              limit=5)
    module = tmp_path / "models.py"
    module.write_text("import torch\n"
                      "def crash(x):\n    raise RuntimeError('mat1 and mat2 shapes cannot be multiplied')\n"
                      "def zeros(x):\n    return torch.zeros(len(x), 10)\n")
    common = ["--preset", "cluttered60", "--data-dir", "bundled", "--limit", "20"]
    assert evaluate.main(["--model", f"{module}:crash", *common]) == 2
    assert "raised RuntimeError: mat1 and mat2" in capsys.readouterr().err
    assert evaluate.main(["--model", f"{module}:zeros", *common, "--json"]) == 0
    (tmp_path / "line.json").write_text(capsys.readouterr().out.strip().splitlines()[-1])
    loaded = BenchmarkResult.load(tmp_path / "line.json")
    assert loaded.n == 20 and loaded.right is not None and paired(loaded, loaded)["only_a"] == 0
