"""What every command line promises: a bad input is one line on stderr and exit code 2, Ctrl-C is
one line and exit code 130, and neither leaves a traceback."""
import importlib.util
from pathlib import Path

import pytest

from glimpse.cli import interruptible
from glimpse.commands import evaluate

ROOT = Path(__file__).resolve().parents[1]


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ctrl_c_is_one_line_and_exit_130(capsys):
    @interruptible
    def main(argv=None):
        raise KeyboardInterrupt
    assert main([]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


@pytest.mark.parametrize("name,argv,message", [
    ("checkpoint_table", ["--checkpoints", "/nonexistent"], "--checkpoints /nonexistent is not a folder"),
    ("checkpoint_table", ["--threads", "0"], "--threads must be between 1 and 1024"),
    ("finding", ["--checkpoint", "checkpoints/ram-cluttered60.pt", "--threads", "100000"], "--threads must be between"),
    ("reinforce_estimators", ["--checkpoint", "checkpoints/ram-cluttered60.pt", "--seed", "-1"], "--seed >= 0"),
    ("finding", ["--checkpoint", "checkpoints/ram-cluttered60.pt", "--seed", "-1"], "--seed must be >= 0"),
    ("make_canvases", ["--seed", str(2**64), "--out", "x.npz"], "--seed must be >= 0 and below 2**63"),
    ("make_mnist_subset", ["--data-dir", "/nonexistent", "--out", ""], "--out must name a .npz file"),
    ("quickstart_block", ["--data-dir", "/nonexistent"], "train.py exited 2: error: no MNIST in /nonexistent"),
    ("comparisons", [], "nothing to do: give --add A B or --check"),
    ("comparisons", ["--check", "--canvas-seed", "1"], "--canvas-seed applies to --add"),
    ("comparisons", ["--add", "/etc/passwd", "checkpoints/sat-cluttered60.pt"], "is outside the clone"),
    ("estimator_control", ["--samples", "1"], "--samples must be between 2 and 1000"),
    ("estimator_control", ["--checkpoint", "checkpoints/ram-diff-cluttered60.pt"],
     "model that draws no reparameterised locations"),
])
def test_scripts_refuse_bad_input_in_one_line(name, argv, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert script(name).main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_default_checkpoints_are_found_from_any_working_directory(tmp_path, capsys, monkeypatch):
    """The scripts' default checkpoints are named from the clone's root and found there: run from
    elsewhere, they load (and the run stops at the missing data, not at the checkpoint)."""
    spec = importlib.util.spec_from_file_location("denormals", ROOT / "benchmarks" / "denormals.py")
    denormals = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(denormals)
    monkeypatch.chdir(tmp_path)
    for main in (denormals.main, script("estimator_control").main):
        assert main(["--data-dir", str(tmp_path / "nowhere")]) == 2
        assert "no MNIST in" in capsys.readouterr().err


def test_a_model_module_that_fails_to_import_is_named_with_its_line(tmp_path, capsys):
    module = tmp_path / "broken.py"
    module.write_text("import math\nx = 1 / 0\n\ndef predict(canvases):\n    return canvases\n")
    assert evaluate.main(["--model", f"{module}:predict", "--preset", "cluttered60", "--data-dir", "bundled",
                          "--limit", "10"]) == 2
    err = capsys.readouterr().err
    assert f"cannot import {module} (ZeroDivisionError: division by zero at {module}:2)" in err
    assert "Traceback" not in err


def test_an_outside_model_is_named_and_warned_about_the_bundled_digits(tmp_path, capsys):
    import json

    module = tmp_path / "zeros.py"
    module.write_text("import torch\n\ndef predict(canvases):\n    return torch.zeros(len(canvases), 10)\n")
    assert evaluate.main(["--model", f"{module}:predict", "--name", "all zeros", "--preset", "cluttered60",
                          "--data-dir", "bundled", "--limit", "20", "--json"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("all zeros on test canvases") and json.loads(out.splitlines()[-1])["model"] == "all zeros"
    assert "bundled subset's digits" in err
    assert evaluate.main(["--checkpoint", str(ROOT / "checkpoints" / "ram-cluttered60.pt"), "--name", "x"]) == 2


def test_a_written_file_is_whole_or_as_it_was(tmp_path):
    """Reports, README blocks and saved results are written beside their file and renamed over it:
    a write that fails midway (a full disk, Ctrl-C) leaves the old file and no debris."""
    from glimpse.cli import replace_block, write_atomically, write_text

    path = tmp_path / "README.md"
    write_text(path, "intro\n<!-- a -->\nold\n<!-- b -->\nend\n")

    def torn(file):
        file.write(b"half a rep")
        raise OSError("No space left on device")
    with pytest.raises(OSError, match="No space"):
        write_atomically(path, torn)
    assert path.read_text() == "intro\n<!-- a -->\nold\n<!-- b -->\nend\n"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]
    replace_block(path, "<!-- a -->", "<!-- b -->", "new")
    assert path.read_text() == "intro\n<!-- a -->\nnew\n<!-- b -->\nend\n"
    assert path.stat().st_mode & 0o777 == 0o644  # readable by all, as a shared file is (mkstemp's are private)
    path.chmod(0o640)
    write_text(path, "kept mode")
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_stored_comparison_is_scored_as_evaluate_scores_it_replaced_not_doubled_and_checked(tmp_path, capsys,
                                                                                               monkeypatch):
    import json

    from glimpse.evaluation import compare_checkpoints

    comparisons = script("comparisons")
    monkeypatch.setattr(comparisons, "LEDGER", tmp_path / "comparisons.json")
    monkeypatch.chdir(ROOT)
    pair = ["checkpoints/sat-cluttered60.pt", "checkpoints/stn-cluttered60.pt"]
    for _ in range(2):  # the same pair again replaces its entry
        assert comparisons.main(["--add", *pair, "--data-dir", "bundled"]) == 0
    [entry] = json.loads((tmp_path / "comparisons.json").read_text())["comparisons"]
    test = compare_checkpoints(*pair, data_dir="bundled", progress=False)
    assert (entry["only_a"], entry["only_b"], entry["p"]) == (test["only_a"], test["only_b"], test["p"])
    assert entry["command"] == f"python evaluate.py --checkpoint {pair[0]} --against {pair[1]}"
    assert comparisons.main(["--check", "--data-dir", "bundled"]) == 0
    assert "same: python evaluate.py" in capsys.readouterr().out
    entry["only_a"] += 1  # a stored result the checkpoints no longer give
    (tmp_path / "comparisons.json").write_text(json.dumps({"comparisons": [entry]}))
    assert comparisons.main(["--check", "--data-dir", "bundled"]) == 1
    assert "CHANGED" in capsys.readouterr().out
    entry["only_a"] -= 1
    entry["digest_b"] = "0" * 16  # another run shipped under the same name
    (tmp_path / "comparisons.json").write_text(json.dumps({"comparisons": [entry]}))
    assert comparisons.main(["--check", "--data-dir", "bundled"]) == 1
    assert f"REPLACED since it was stored ({pair[1]})" in capsys.readouterr().out
