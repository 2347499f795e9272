"""scripts/make_canvases.py: fresh test canvases that evaluate.py --images scores."""
import importlib.util
from pathlib import Path

import numpy as np

from glimpse.commands import evaluate

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_canvases", ROOT / "scripts" / "make_canvases.py")
make_canvases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_canvases)


def test_fresh_canvases_follow_the_recipe_and_evaluate_reads_them(tmp_path, capsys):
    out = tmp_path / "fresh.npz"
    argv = ["--preset", "cluttered60", "--seed", "7", "--out", str(out), "--data-dir", "bundled"]
    assert make_canvases.main(argv) == 0
    with np.load(out) as archive:
        images, labels = archive["images"], archive["labels"]
    assert images.shape == (2000, 60, 60) and images.dtype == np.uint8 and labels.shape == (2000,)
    assert make_canvases.main([*argv[:3], "8", *argv[4:]]) == 0  # another seed, other canvases
    with np.load(out) as archive:
        assert not np.array_equal(archive["images"], images)
        np.testing.assert_array_equal(archive["labels"], labels)  # the same digits, each once
    checkpoint = ROOT / "checkpoints" / "sat-cluttered60.pt"
    assert evaluate.main(["--checkpoint", str(checkpoint), "--images", str(out)]) == 0
    assert "n=2000" in capsys.readouterr().out
    assert make_canvases.main(["--seed", "-1", "--out", str(out), "--data-dir", "bundled"]) == 2
    assert "--seed must be >= 0 and below 2**63, got -1" in capsys.readouterr().err


def test_an_out_that_is_no_npz_file_is_refused_and_a_failed_write_keeps_the_old_file(tmp_path, capsys, monkeypatch):
    common = ["--seed", "7", "--data-dir", "bundled", "--limit", "20"]
    for out in ("", str(tmp_path), str(tmp_path / "fresh")):  # numpy would have written ..npz, a dir's .npz, fresh.npz
        assert make_canvases.main([*common, "--out", out]) == 2
        assert "--out must name a .npz file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "fresh.npz"
    assert make_canvases.main([*common, "--out", str(out)]) == 0
    kept = out.read_bytes()

    def interrupted(file, **arrays):
        file.write(b"half an archive")
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez_compressed", interrupted)
    assert make_canvases.main([*common, "--out", str(out)]) == 130
    assert out.read_bytes() == kept and [p.name for p in tmp_path.iterdir()] == ["fresh.npz"]


def test_training_digit_canvases_for_the_generalisation_gap(tmp_path, capsys):
    """--split train --limit N: the first N training digits, each once, in the test recipe."""
    from envs.data import load_mnist
    out = tmp_path / "train.npz"
    argv = ["--preset", "cluttered60", "--split", "train", "--seed", "7", "--out", str(out), "--data-dir", "bundled"]
    assert make_canvases.main([*argv, "--limit", "300"]) == 0
    with np.load(out) as archive:
        assert archive["images"].shape == (300, 60, 60)
        train_labels = load_mnist("bundled").train.labels[:300]
        np.testing.assert_array_equal(np.sort(archive["labels"]), np.sort(train_labels))
    assert make_canvases.main([*argv, "--limit", "0"]) == 2
    assert "--limit must be >= 1, got 0" in capsys.readouterr().err
