"""The estimator control: RAM's retina read differentiably in the location, and the family that
learns where to look through it by backpropagation."""
import math

import pytest
import torch

from envs.retina import extract_glimpses, integral_images
from glimpse.models import get_family
from glimpse.models.diff_retina import integral_image, read_glimpses
from glimpse.models.ram_diff import DifferentiableRetinaRAM, RetinaRAMConfig


def canvases(n=4, size=60, seed=0):
    return torch.randint(0, 256, (n, size, size), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("glimpse_size,n_scales", [(12, 3), (12, 4), (8, 1)])
def test_where_box_origins_are_whole_pixels_it_reads_what_the_retina_reads(glimpse_size, n_scales):
    """Centres on whole pixels put every box's origin on a whole pixel (half widths are whole:
    g * 2**s / 2), where the retina's rounding changes nothing; edges and corners included."""
    images = canvases()
    pixels = torch.tensor([[30.0, 30.0], [5.0, 57.0], [0.0, 12.0], [60.0, 3.0]])
    locations = pixels * (2 / 60) - 1
    theirs = extract_glimpses(integral_images(images), locations, glimpse_size, n_scales)
    ours = read_glimpses(integral_image(images.double() / 255), locations.double(), glimpse_size, n_scales)
    # float32 locations place the centres within ~1e-6 pixel of the whole pixel: cells agree to ~1e-5
    torch.testing.assert_close(ours, theirs.double(), rtol=0, atol=1e-5)


def test_its_derivative_in_the_location_is_the_finite_difference_off_the_pixel_grid():
    """float64, points off the pixel grid, a step far under a pixel (1e-6 of half the canvas)."""
    ii = integral_image(canvases(3).double() / 255)
    locations = torch.tensor([[0.137, -0.4213], [0.7101, 0.3333], [-0.95, 0.051]], dtype=torch.float64)
    weights = torch.randn(3, 3, 12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def f(where):
        return (read_glimpses(ii, where, 12, 3) * weights).sum()

    where = locations.clone().requires_grad_(True)
    f(where).backward()
    step, numeric = 1e-6, torch.zeros_like(locations)
    for i in range(3):
        for j in range(2):
            delta = torch.zeros_like(locations)
            delta[i, j] = step
            numeric[i, j] = (f(locations + delta) - f(locations - delta)) / (2 * step)
    torch.testing.assert_close(where.grad, numeric, rtol=1e-6, atol=1e-8)
    assert where.grad.abs().min() > 0  # these boxes cross ink: the location gets a gradient


def test_a_blank_canvas_gives_the_location_no_gradient():
    """The gradient comes only from box edges that cross ink."""
    where = torch.tensor([[0.1, 0.2]], dtype=torch.float64, requires_grad=True)
    read_glimpses(integral_image(torch.zeros(1, 60, 60, dtype=torch.float64)), where, 12, 3).sum().backward()
    assert torch.equal(where.grad, torch.zeros_like(where))


@pytest.mark.parametrize("how", ["reparameterised", "deterministic"])
def test_the_classification_loss_reaches_the_location_head_through_the_glimpses(how):
    torch.manual_seed(0)
    model = DifferentiableRetinaRAM(RetinaRAMConfig(location_gradient=how))
    images = canvases(8).float()[:, None] / 255
    noise = torch.randn(8, 5, 2)
    out = model(images, noise)
    torch.nn.functional.cross_entropy(out["logits"], torch.arange(8) % 10).backward()
    assert model.location_policy.mean.weight.grad.abs().sum() > 0
    mean_only = model(images)["locations"]  # evaluation follows the mean
    assert torch.equal(out["locations"], mean_only) == (how == "deterministic")
    assert out["locations"].shape == (8, 6, 2) and torch.all(out["locations"][:, 0] == 0)


def test_it_is_a_soft_family_with_ram_s_sensor_and_a_box_a_pixel_wider():
    family, ram = get_family("ram-diff"), get_family("ram")
    assert family.mode == "soft" and "differentiable retina" in family.title
    task = {"canvas_size": 60, "n_clutter": 4, "centred_digit": False, "glimpse_size": 12, "n_scales": 3,
            "n_glimpses": 6, "first_location": "centre"}
    ram_config = ram.model_config(type("C", (), {**{k: v for k, v in task.items()}, "hidden_size": 256, "core": "lstm",
                                                 "glimpse_net": "conv", "location_std": 0.15, "location_std_final": 0,
                                                 "reinforce_into_core": 0.1, "random_glimpses": False,
                                                 "context_size": 0})())
    ram_cost, cost = ram.pixels_read(task, ram_config), family.pixels_read(task, {})
    assert cost["sensor_values"] == ram_cost["sensor_values"] and cost["input_pixels"] == ram_cost["input_pixels"]
    # RAM snaps its 48-pixel box to whole pixels; between pixels the same box overlaps 49 a side
    assert ram_cost["canvas_pixels_touched"] == 6 * 48 * 48 and cost["canvas_pixels_touched"] == 6 * 49 * 49


def test_the_deterministic_variant_has_no_std_to_state():
    """Following the policy mean, the model reads and decides the same whatever its std; so the
    report's deterministic runs state none, and a run trained without one is the same recipe."""
    from glimpse.report.experiments import by_name, converged
    from glimpse.training.config import resolve_config

    images = canvases(4).float()[:, None] / 255
    outputs = []
    for std in (0.05, 0.25):
        torch.manual_seed(0)
        model = DifferentiableRetinaRAM(RetinaRAMConfig(location_gradient="deterministic", location_std=std))
        outputs.append(model(images))
    assert all(torch.equal(outputs[0][k], outputs[1][k]) for k in ("logits", "locations"))
    recipe = converged(by_name("ram-diff-deterministic")).train_options(seed=0, epochs=80)
    preset = resolve_config({"preset": recipe["preset"], "mode": "soft", "arch": "ram-diff"})
    assert recipe["location_gradient"] == "deterministic"
    assert (recipe["location_std"], recipe["location_std_final"]) == (preset.location_std, preset.location_std_final)
    reparameterised = converged(by_name("ram-diff")).train_options(seed=0, epochs=80)
    assert reparameterised["location_std_final"] == 0.1  # the sampled policy still anneals its std


def _head_gradient_and_finite_difference(config, images, labels, noise):
    """The location head's bias: its gradient by backpropagation, and by central differences of the
    model's loss (float64, a step far under a pixel's worth of location)."""
    torch.manual_seed(0)
    model = DifferentiableRetinaRAM(config).double()

    def loss():
        return torch.nn.functional.cross_entropy(model(images, noise)["logits"], labels, reduction="sum")
    loss().backward()
    bias, step, numeric = model.location_policy.mean.bias, 1e-6, torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for i in range(2):
            bias[i] += step
            up = loss()
            bias[i] -= 2 * step
            numeric[i] = (up - loss()) / (2 * step)
            bias[i] += step
    return bias.grad.clone(), numeric


@pytest.mark.parametrize("how", ["reparameterised", "deterministic"])
def test_backpropagation_gives_the_gradient_of_the_model_s_own_loss(how):
    """Undamped, the location head's gradient is the finite difference of the whole model's loss: the
    location is credited with all it changes, the glimpse network's "where" input included, as
    REINFORCE credits RAM's location through its reward. With the "where" input detached (how runs
    before ``where_gradient`` trained) it is not: a biased gradient."""
    images = canvases(6).double()[:, None] / 255
    labels = torch.arange(6) % 10
    noise = 0.3 * torch.randn(6, 2, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    config = dict(n_glimpses=3, hidden_size=32, location_gradient=how, attention_into_core=1.0)
    grad, numeric = _head_gradient_and_finite_difference(RetinaRAMConfig(**config), images, labels, noise)
    torch.testing.assert_close(grad, numeric, rtol=1e-5, atol=1e-9)
    detached, numeric = _head_gradient_and_finite_difference(RetinaRAMConfig(**config, where_gradient=False),
                                                             images, labels, noise)
    assert not torch.allclose(detached, numeric, rtol=1e-2, atol=0)


def test_a_checkpoint_from_before_the_where_gradient_loads_as_it_was_trained(tmp_path, capsys):
    """A model config without ``where_gradient`` (runs made before it) builds the detached model, the
    one its weights were trained as; resuming such a run with this version is refused by name, as it
    would change its gradient midway."""
    from glimpse.checkpoint import load_checkpoint, save_checkpoint
    from glimpse.commands import train

    family = get_family("ram-diff")
    old = {k: v for k, v in RetinaRAMConfig().to_dict().items() if k != "where_gradient"}
    assert family.config(old).where_gradient is False and RetinaRAMConfig().where_gradient is True
    argv = ["--mode", "soft", "--arch", "ram-diff", "--preset", "mnist28", "--epochs", "2", "--max-steps", "2",
            "--batch-size", "16", "--data-dir", "bundled", "--run-dir", str(tmp_path), "--run-name", "old"]
    assert train.main(argv) == 0
    last = tmp_path / "old" / "last.pt"
    payload = load_checkpoint(last)
    save_checkpoint(last, {**{k: v for k, v in payload.items() if k != "format"},
                           "model_config": {k: v for k, v in payload["model_config"].items() if k != "where_gradient"}})
    capsys.readouterr()
    assert train.main(["--resume", str(tmp_path / "old"), "--max-steps", "4"]) == 2
    assert "where_gradient=False (now True)" in capsys.readouterr().err


def test_the_damping_knob_scales_the_location_path_into_the_core():
    """``attention_into_core`` S leaves the forward as it is and scales the gradient that reaches
    the core through the location head; with two glimpses there is one such path, so the core's
    gradient is affine in S."""
    images = canvases(4).double()[:, None] / 255
    labels = torch.arange(4)
    grads, outputs = {}, {}
    for share in (0.0, 0.3, 1.0):
        torch.manual_seed(0)
        model = DifferentiableRetinaRAM(RetinaRAMConfig(n_glimpses=2, hidden_size=32, location_gradient="deterministic",
                                                        attention_into_core=share)).double()
        outputs[share] = model(images)["logits"]
        torch.nn.functional.cross_entropy(outputs[share], labels).backward()
        grads[share] = torch.cat([p.grad.flatten() for p in model.glimpse_network.parameters()])
    assert torch.equal(outputs[0.0], outputs[0.3]) and torch.equal(outputs[0.0], outputs[1.0])
    torch.testing.assert_close(grads[0.3], 0.7 * grads[0.0] + 0.3 * grads[1.0])
    assert not torch.allclose(grads[0.0], grads[1.0])


def test_a_sample_clipped_to_the_canvas_gives_the_head_no_gradient():
    """A sampled location outside the canvas is clipped, as RAM's env clips it: the clipped objective's
    gradient in the head is zero."""
    torch.manual_seed(0)
    model = DifferentiableRetinaRAM(RetinaRAMConfig(n_glimpses=2, hidden_size=32))
    out = model(canvases(3).float()[:, None] / 255, torch.full((3, 1, 2), 50.0))
    assert torch.equal(out["locations"][:, 1], torch.ones(3, 2))
    torch.nn.functional.cross_entropy(out["logits"], torch.arange(3)).backward()
    assert torch.equal(model.location_policy.mean.weight.grad, torch.zeros_like(model.location_policy.mean.weight))


def test_its_score_function_reads_the_draws_from_the_states_the_policy_read():
    """What a score-function estimate needs (glimpse/gradient_noise.py): the returned states give
    back the means each location was drawn around, and the density is of the unclipped draws."""
    torch.manual_seed(0)
    family = get_family("ram-diff")
    model = DifferentiableRetinaRAM(RetinaRAMConfig(n_glimpses=4, hidden_size=32, location_std=0.2))
    assert family.reparameterised_locations(model.config.to_dict())
    assert not family.reparameterised_locations({**model.config.to_dict(), "location_gradient": "deterministic"})
    noise = torch.randn(3, 3, 2)
    noise[0, 0] = 40.0  # far off the canvas: clipped, and its density is the draw's, not the edge's
    out = model(canvases(3).float()[:, None] / 255, noise)
    assert out["states"].shape == (3, 3, 32) and out["draws"].shape == (3, 3, 2)
    mean, std = model.location_policy(out["states"])
    torch.testing.assert_close(out["draws"], mean + std * noise)
    torch.testing.assert_close(out["locations"][:, 1:], out["draws"].clamp(-1, 1))
    expected = (-0.5 * noise.pow(2) - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum((1, 2))
    torch.testing.assert_close(family.location_log_prob(model, out), expected)


@pytest.mark.parametrize("bad, says", [(dict(location_std=0.0), "location_std"), (dict(glimpse_net="mlp"), "glimpse_net")])
def test_its_config_refuses_what_ram_s_refuses(bad, says):
    """A zero std would make the policy's log-density infinite; an unknown glimpse network fails at once."""
    with pytest.raises(ValueError, match=says):
        RetinaRAMConfig(**bad)
