"""glimpse/finding.py and scripts/finding.py: where a model looked against where the digit is."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from glimpse.commands import train
from envs.engine import fixed_canvas_set
from glimpse.finding import attention_centres, finding_summary, reading_summary
from glimpse.models import build_model
from glimpse.training.config import resolve_config

SCRIPT = importlib.util.spec_from_file_location(
    "finding_script", Path(__file__).resolve().parents[1] / "scripts" / "finding.py")


def test_summary_by_hand():
    # two canvases, two steps; digits' boxes at (0, 0) and (30, 10): centres (14, 14) and (44, 24)
    digit_xy = np.array([[0, 0], [30, 10]])
    centres = np.array([[[14.0, 14.0], [20.0, 14.0]],    # on the digit, then 6 px right of it
                        [[0.0, 24.0], [44.0, 36.0]]])    # 44 px left, then 12 px below
    summary = finding_summary(centres, digit_xy, predictions=np.array([3, 5]), labels=np.array([3, 7]),
                                   radius=10)
    assert summary["median_distance_per_step"] == [22.0, 9.0]
    assert summary["within_radius_per_step"] == [0.5, 0.5]
    assert summary["found"] == 0.5 and summary["error"] == 0.5
    assert summary["error_when_found"] == 0.0 and summary["error_when_not_found"] == 1.0
    assert summary["share_of_errors_not_found"] == 1.0
    assert finding_summary(centres, digit_xy, np.array([3, 5]), np.array([3, 7]), radius=13)["found"] == 1.0


def test_reading_summary_by_hand():
    # canvas 0: digits' boxes at (0, 0) and (40, 50), centres (14, 14) and (54, 64); gap 40 px.
    #   block 1 looks at digit 1 and answers it; block 2 looks at digit 1 again and answers its label.
    # canvas 1: boxes at (10, 0) and (11, 60), gap 1 px; block 1 looks only at digit 2 and answers
    #   a digit no one wrote; block 2 looks at digit 2 and reads it right.
    digit_xy = np.array([[[0, 0], [40, 50]], [[10, 0], [11, 60]]])
    centres = np.array([[[14.0, 14.0], [90.0, 90.0], [16.0, 14.0], [14.0, 20.0]],
                        [[25.0, 74.0], [25.0, 80.0], [25.0, 74.0], [90.0, 0.0]]])
    labels = np.array([[3, 7], [1, 2]])
    summary = reading_summary(centres, digit_xy, predictions=np.array([[3, 3], [9, 2]]), labels=labels, radius=10)
    assert summary["n"] == 2 and summary["n_digits"] == 2 and summary["error"] == 1.0
    assert summary["digit_error"] == [0.5, 0.5]
    assert summary["found"] == [0.5, 0.5]               # canvas 0 block 1, canvas 1 block 2
    assert summary["only_another_digit"] == [0.5, 0.5]  # canvas 1 block 1, canvas 0 block 2
    assert summary["answered_another_digit"] == [0.0, 0.5]  # canvas 0: 3 is digit 1's label
    assert summary["error_where_found"] == [0.0, 0.0]   # both found blocks answered right
    misread = reading_summary(centres, digit_xy, predictions=np.array([[5, 3], [9, 2]]), labels=labels, radius=10)
    assert misread["error_where_found"] == [1.0, 0.0]   # canvas 0 looked at digit 1 and misread it
    assert [(row["low"], row["high"], row["share"], row["error"]) for row in summary["error_by_gap"]] == [
        (0, 3, 0.5, 1.0), (3, 10, 0.0, None), (10, None, 0.5, 1.0)]
    right = reading_summary(centres, digit_xy, labels, labels, radius=10)
    assert right["error"] == 0.0 and right["answered_another_digit"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="blocks"):
        reading_summary(centres[:, :3], digit_xy, labels, labels, radius=10)


@pytest.mark.parametrize("kind", ["ram", "draw", "sat"])
def test_centres_are_in_pixels_one_per_step(kind, bundled):
    config = resolve_config({"mode": "hard"} if kind == "ram" else {"mode": "soft", "soft_arch": kind})
    task = config.task()
    canvases = fixed_canvas_set(bundled.test.images[:9], bundled.test.labels[:9], 60, 4, False, seed=0)
    torch.manual_seed(0)
    model_config = dict(canvas_size=60, n_glimpses=config.n_glimpses) if kind != "ram" else dict(n_glimpses=6)
    model = build_model(kind, model_config)
    centres, predictions = attention_centres(kind, model, task, canvases.images, batch_size=4)
    assert centres.shape == (9, config.n_glimpses, 2) and predictions.shape == (9,)
    assert (centres >= 0).all() and (centres <= 60).all()
    if kind in ("ram", "draw"):  # both start at the canvas centre
        np.testing.assert_allclose(centres[:, 0], 30.0, atol=1e-4)


def test_uniform_attention_is_centred():
    """Show-Attend-Tell: equal weight on every cell looks at the canvas centre."""
    class Uniform(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, images):
            return {"logits": torch.zeros(len(images), 10), "alpha": torch.full((len(images), 2, 7, 7), 1 / 49)}

    centres, _ = attention_centres("sat", Uniform(), {"canvas_size": 60}, np.zeros((3, 60, 60), np.uint8))
    np.testing.assert_allclose(centres, 27.5, atol=1e-5)  # the middle cell of 7, centred on 8 * 3 + 3.5


def test_sat_cell_centres_match_the_receptive_fields():
    """A lone bright pixel moves the encoder's output most in the cell whose centre is nearest."""
    from glimpse.models.sat_encoder import ConvEncoder

    torch.manual_seed(0)
    encoder = ConvEncoder()
    centres = ConvEncoder.cell_centres(7)
    assert centres.tolist() == [3.5, 11.5, 19.5, 27.5, 35.5, 43.5, 51.5]
    made_like = ConvEncoder.cell_centres(7, like=torch.zeros(1, dtype=torch.float64))  # on its device and dtype
    assert made_like.dtype == torch.float64 and made_like.tolist() == centres.tolist()
    with torch.no_grad():
        blank = encoder(torch.zeros(1, 1, 60, 60))[0]
        for x in (4, 27, 44):  # the pixel covering [x, x + 1]: centre x + 0.5
            image = torch.zeros(1, 1, 60, 60)
            image[0, 0, 30, x] = 1.0
            change = (encoder(image)[0] - blank).abs().sum(-1).view(7, 7)
            assert change.sum(0).argmax().item() == (centres - (x + 0.5)).abs().argmin().item()


def test_a_sat_cell_centre_is_the_centre_of_its_receptive_field():
    """To the half pixel: the encoder with unit weights, average pools and no ReLU (a linear network
    of the same geometry, so every pixel's weight shows in the gradient) weighs the pixels of an
    interior cell's receptive field symmetrically about the cell's centre."""
    from glimpse.models.sat_encoder import ConvEncoder

    encoder = ConvEncoder()
    linear = {torch.nn.MaxPool2d: lambda m: torch.nn.AvgPool2d(2), torch.nn.ReLU: lambda m: torch.nn.Identity()}
    layers = torch.nn.Sequential(*[linear.get(type(m), lambda m: m)(m) for m in encoder.layers])
    with torch.no_grad():
        for module in layers:
            if isinstance(module, torch.nn.Conv2d):
                module.weight.fill_(1.0), module.bias.zero_()
    image = torch.zeros(1, 1, 60, 60, requires_grad=True)
    layers(image)[0, :, 3, 3].sum().backward()
    weight = image.grad[0, 0].sum(0)  # along x
    centre = (weight * torch.arange(60)).sum() / weight.sum() + 0.5  # pixel i covers [i, i + 1]
    assert centre.item() == pytest.approx(ConvEncoder.cell_centres(7)[3].item())


def test_full_image_models_are_refused():
    with pytest.raises(ValueError, match="no attention"):
        attention_centres("cnn", build_model("cnn", dict(canvas_size=60)), {"canvas_size": 60},
                          np.zeros((2, 60, 60), np.uint8))


@pytest.fixture(scope="module")
def script():
    module = importlib.util.module_from_spec(SCRIPT)
    SCRIPT.loader.exec_module(module)
    return module


def test_script_on_a_checkpoint(script, tmp_path, capsys):
    assert train.main(["--data-dir", "bundled", "--threads", "1", "--image-every", "0", "--run-dir", str(tmp_path),
                       "--run-name", "d", "--mode", "soft", "--soft-arch", "draw", "--max-steps", "2",
                       "--batch-size", "16"]) == 0
    checkpoint = str(tmp_path / "d" / "best.pt")
    capsys.readouterr()
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out[-1])
    assert result["kind"] == "draw" and result["n"] == 2000 and 0 <= result["found"] <= 1
    assert len(result["median_distance_per_step"]) == 6 and out[1].startswith("| step |")
    assert script.main(["--checkpoint", checkpoint, checkpoint, "--data-dir", "bundled", "--json", "--limit", "200"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "200 test canvases each" and out[1].startswith("| checkpoint | test error |")
    first, second = json.loads(out[-1])
    assert len(out) == 6 and first == second and first["n"] == 200  # canvases, header, rule, a row each, JSON
    assert script.main(["--checkpoint", checkpoint, checkpoint, "--data-dir", "bundled", "--split", "val",
                        "--canvas-seed", "5", "--limit", "200"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "200 fresh val canvases (seed 5) each" and out[1].startswith("| checkpoint | val error |")
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--limit", "0"]) == 2
    assert "--limit must be >= 1, got 0" in capsys.readouterr().err
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--radius", "0"]) == 2
    assert "radius" in capsys.readouterr().err
    assert script.main(["--checkpoint", str(tmp_path / "missing.pt"), "--data-dir", "bundled"]) == 2
    assert f"checkpoint {tmp_path / 'missing.pt'} does not exist" in capsys.readouterr().err
    # a glob over checkpoints/ catches the no-attention controls: skipped among several, refused alone
    assert train.main(["--data-dir", "bundled", "--threads", "1", "--image-every", "0", "--run-dir", str(tmp_path),
                       "--run-name", "c", "--mode", "full", "--arch", "cnn", "--max-steps", "2",
                       "--batch-size", "16"]) == 0
    full = str(tmp_path / "c" / "best.pt")
    capsys.readouterr()
    assert script.main(["--checkpoint", checkpoint, full, "--data-dir", "bundled", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == result and "skipped" in captured.err
    assert script.main(["--checkpoint", full, "--data-dir", "bundled"]) == 2
    assert "whole canvas" in capsys.readouterr().err
    assert script.main(["--checkpoint", full, full, "--data-dir", "bundled"]) == 2
    assert "none of these checkpoints has attention to locate" in capsys.readouterr().err


def test_script_on_a_two_digit_checkpoint(script, tmp_path, capsys):
    assert train.main(["--data-dir", "bundled", "--threads", "1", "--image-every", "0", "--run-dir", str(tmp_path),
                       "--run-name", "m", "--mode", "hard", "--preset", "multi100", "--n-glimpses", "2",
                       "--max-steps", "2", "--batch-size", "16"]) == 0
    checkpoint = str(tmp_path / "m" / "best.pt")
    capsys.readouterr()
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out[-1])
    assert result["n_digits"] == 2 and result["n"] == 2000 and len(result["found"]) == 2
    assert sum(row["share"] for row in result["error_by_gap"]) == pytest.approx(1.0)
    assert out[1].startswith("| digit (reading order) |") and len(out) == 11  # title, 2 + 2 rows, 2 + 3 rows, JSON
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--canvas-seed", "5", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    fresh = json.loads(out[-1])
    assert "fresh test canvases (seed 5)" in out[0] and fresh["canvas_seed"] == 5 and fresh["n"] == 2000
    assert fresh["error_by_gap"] != result["error_by_gap"]  # other canvases, other gaps
    assert script.main(["--checkpoint", checkpoint, "--data-dir", "bundled", "--canvas-seed", "-1"]) == 2
    assert "--canvas-seed must be >= 0, got -1" in capsys.readouterr().err
