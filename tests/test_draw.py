"""DRAW's differentiable-RAM classifier (glimpse/models/draw.py): shapes, first read, gradients."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from glimpse.models import build_model
from glimpse.models.draw import DRAWClassifier, DRAWConfig
from glimpse.models.filterbank import FilterbankParams, filterbank_matrices, read


@pytest.mark.parametrize("size,steps,n", [(60, 8, 12), (100, 3, 10)])
def test_output_shapes(size, steps, n):
    torch.manual_seed(0)
    model = DRAWClassifier(DRAWConfig(canvas_size=size, n_glimpses=steps, read_size=n))
    out = model(torch.rand(2, 1, size, size))
    assert set(out) == {"logits", "centre", "stride", "sigma2", "gamma", "reads"}
    assert out["logits"].shape == (2, 10) and out["centre"].shape == (2, steps, 2)
    for key in ("stride", "sigma2", "gamma"):
        assert out[key].shape == (2, steps), key
    assert out["reads"].shape == (2, steps, n, n)
    assert all(torch.isfinite(value).all() for value in out.values())


@pytest.mark.parametrize("size", [60, 100])
def test_first_step_is_centred_and_covers_the_canvas(size):
    torch.manual_seed(0)
    config = DRAWConfig(canvas_size=size, n_glimpses=2)
    n = config.read_size
    out = DRAWClassifier(config)(torch.rand(3, 1, size, size))
    torch.testing.assert_close(out["centre"][:, 0], torch.zeros(3, 2))  # h0 = 0: the bias alone
    torch.testing.assert_close(out["stride"][:, 0] * (n - 1), torch.full((3,), size - 1.0))
    torch.testing.assert_close(out["gamma"][:, 0], torch.ones(3))
    sigma = out["sigma2"][0, 0].sqrt()
    assert 0.25 * out["stride"][0, 0] < sigma < out["stride"][0, 0]  # filters overlap, no heavy blur
    # the first and last filters sit on the first and last pixels: every part of the canvas is read
    params = FilterbankParams(out["centre"][:1, 0], torch.full((1, 2), size / 2), out["stride"][:1, 0],
                              out["sigma2"][:1, 0], out["gamma"][:1, 0])
    f_x, _ = filterbank_matrices(params, size, size, n)
    assert f_x[0].argmax(-1)[[0, -1]].tolist() == [0, size - 1]
    assert (f_x[0].sum(0) > 1e-3).all()  # no column of the canvas is left out


def test_sigma_floor_starts_from_the_same_read():
    torch.manual_seed(0)
    images = torch.rand(2, 1, 60, 60)
    reads = {}
    for strides in (0.0, 0.4):
        torch.manual_seed(1)
        config = DRAWConfig(canvas_size=60, n_glimpses=1, min_sigma_strides=strides)
        reads[strides] = DRAWClassifier(config)(images)["reads"]
    torch.testing.assert_close(reads[0.4], reads[0.0])
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="min_sigma_strides"):
            DRAWConfig(canvas_size=60, min_sigma_strides=bad)


def test_a_floor_above_half_a_stride_starts_just_above_it():
    """A read blurred on purpose (a floor of 0.5 strides or more) builds, and its first read's
    sigma is the floor and a tenth of a stride in quadrature (the learned part stays positive)."""
    for strides in (0.5, 1.5):
        model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=1, min_sigma_strides=strides))
        out = model(torch.zeros(1, 1, 60, 60))
        stride = out["stride"][0, 0]
        torch.testing.assert_close(out["sigma2"][0, 0], (strides * stride) ** 2 + (stride / 10) ** 2)


def test_first_read_sees_a_corner_blob_in_the_corner():
    torch.manual_seed(0)
    model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=1))
    image = torch.zeros(1, 1, 60, 60)
    image[0, 0, 50:58, 2:10] = 1.0  # bottom-left: high row (y), low column (x)
    first = model(image)["reads"][0, 0]
    assert first.argmax().item() in {r * 12 + c for r in (9, 10) for c in (0, 1)}


def test_returned_parameters_reproduce_the_reads():
    torch.manual_seed(1)
    model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=3))
    images = torch.rand(2, 1, 60, 60)
    with torch.no_grad():
        out = model(images)
    for t in range(3):
        centre_px = (out["centre"][:, t] + 1) * 30
        params = FilterbankParams(out["centre"][:, t], centre_px, out["stride"][:, t], out["sigma2"][:, t],
                                  out["gamma"][:, t])
        again = read(images[:, 0], *filterbank_matrices(params, 60, 60, 12), params.gamma)
        torch.testing.assert_close(again, out["reads"][:, t])


def test_gradients_reach_the_attention_layer():
    torch.manual_seed(0)
    model = build_model("draw", dict(canvas_size=60, n_glimpses=3))
    F.cross_entropy(model(torch.rand(4, 1, 60, 60))["logits"], torch.arange(4)).backward()
    # every one of the 5 attention outputs gets a gradient (bias) and so do its weights
    assert (model.attention.bias.grad.abs() > 0).all(), model.attention.bias.grad
    assert (model.attention.weight.grad.abs().sum(1) > 0).all()


def test_batch_elements_are_independent():
    torch.manual_seed(0)
    model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=3)).eval()
    images = torch.rand(3, 1, 60, 60)
    with torch.no_grad():
        together = model(images)["logits"]
        alone = model(images[1:2])["logits"]
    torch.testing.assert_close(together[1:2], alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 60, 60), (2, 3, 60, 60), (2, 1, 61, 60), (2, 1, 100, 100)])
def test_bad_input_shape_raises(shape):
    model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=1))
    with pytest.raises(ValueError, match=r"images must be \(B, 1, 60, 60\), got") as info:
        model(torch.rand(*shape))
    assert str(tuple(shape)) in str(info.value)


def test_attention_into_core_scales_the_gradient_that_leaves_the_attention_head():
    # Two steps: h1 = LSTM(read 1); read 2 is placed by attention(h1); the class comes from h2. The
    # gradient into h1 is the LSTM's own path plus S times the path through read 2's placement, so
    # every parameter's gradient is affine in S: g(S) = g(0) + S (g(1) - g(0)).
    images, labels = torch.rand(4, 1, 60, 60, generator=torch.Generator().manual_seed(0)), torch.arange(4)

    def run(scale):
        torch.manual_seed(0)
        model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=2, attention_into_core=scale))
        with torch.no_grad():
            model.attention.weight.mul_(10)  # so that where read 2 falls matters
        out = model(images)
        F.cross_entropy(out["logits"], labels).backward()
        return out, {name: p.grad.clone() for name, p in model.named_parameters()}

    (out_0, g_0), (out_s, g_s), (out_1, g_1) = run(0.0), run(0.3), run(1.0)
    for key in ("logits", "centre", "reads"):  # the setting changes no forward value
        torch.testing.assert_close(out_s[key], out_1[key], rtol=0, atol=0)
        torch.testing.assert_close(out_0[key], out_1[key], rtol=0, atol=0)
    for name in g_1:
        torch.testing.assert_close(g_s[name], g_0[name] + 0.3 * (g_1[name] - g_0[name]), rtol=1e-4, atol=1e-6)
    # the path exists: with all of it the LSTM's input weights get another gradient than with none
    assert not torch.allclose(g_1["cell.weight_ih"], g_0["cell.weight_ih"])
    assert (g_0["attention.weight"].abs().sum(1) > 0).all()  # the attention head still learns at S = 0
    with pytest.raises(ValueError, match="attention_into_core"):
        DRAWConfig(attention_into_core=1.5)
    # from three steps on, what read 2 does to read 3 reaches the head through h2: S damps the
    # head's own gradient too (a bias like truncated backpropagation's, as docs/gradients.md says)

    def head_gradient(scale):
        torch.manual_seed(0)
        model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=3, attention_into_core=scale))
        with torch.no_grad():
            model.attention.weight.mul_(10)
        F.cross_entropy(model(images)["logits"], labels).backward()
        return model.attention.weight.grad
    assert not torch.allclose(head_gradient(0.5), head_gradient(1.0), rtol=1e-3, atol=0)


def test_state_gradient_norms_measure_the_loop_without_touching_the_model():
    from glimpse.models.draw import state_gradient_norms

    torch.manual_seed(0)
    model = DRAWClassifier(DRAWConfig(canvas_size=60, n_glimpses=3))
    with torch.no_grad():
        model.attention.weight.mul_(10)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    images, labels = torch.rand(4, 1, 60, 60), torch.arange(4)
    full, none = state_gradient_norms(model, images, labels, 1.0), state_gradient_norms(model, images, labels, 0.0)
    assert full["state"].shape == (3,) and full["attention"].shape == (3, 5) and full["parameters"].dim() == 0
    # the last state's gradient comes from the classifier alone; earlier ones lose the attention path at S = 0
    torch.testing.assert_close(full["state"][-1], none["state"][-1])
    assert not torch.allclose(full["state"][:-1], none["state"][:-1])
    for name, p in model.named_parameters():
        assert p.grad is None and torch.equal(p, before[name])
    # the probe takes the model's dtype (and device): a float64 model is measured in float64
    double = state_gradient_norms(model.double(), images.double(), labels, 1.0)
    assert double["state"].dtype == torch.float64
    torch.testing.assert_close(double["state"], full["state"].double(), rtol=1e-3, atol=1e-6)


def test_gradient_loop_script_on_the_shipped_checkpoint(capsys):
    spec = importlib.util.spec_from_file_location(
        "draw_gradient_loop", Path(__file__).resolve().parents[1] / "scripts" / "draw_gradient_loop.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    checkpoint = str(Path(__file__).resolve().parents[1] / "checkpoints" / "draw-cluttered100.pt")
    args = ["--checkpoint", checkpoint, "--batches", "2", "--batch-size", "4", "--data-dir", "bundled"]
    assert script.main(args + ["--attention-into-core", "1", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "dL/d(centre x, centre y, log sigma^2, log stride, log gamma)" in out  # the family names its parameters
    rows = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 0.3 |"))]
    assert len(rows) == 2 and all(row.count("|") == 8 + 4 + 1 for row in rows)  # S, 8 steps, 3 summaries
    assert script.main(args + ["--attention-into-core", "2"]) == 2
    assert "attention-into-core" in capsys.readouterr().err
    ram = str(Path(checkpoint).with_name("ram-cluttered100.pt"))
    assert script.main(["--checkpoint", ram, "--data-dir", "bundled"]) == 2
    assert "no state -> attention -> state loop" in capsys.readouterr().err
