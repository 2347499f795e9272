"""The Spatial Transformer: shapes, the crop against the pixels it should read, and where
gradients flow (everything is trained by backpropagation, through the sampler)."""
import pytest
import torch
import torch.nn.functional as F

from glimpse.models import get_family
from glimpse.models.stn import LocalisationNetwork, STNConfig, SpatialTransformerClassifier, crop


def test_output_shapes_and_the_first_crop_is_the_whole_canvas():
    torch.manual_seed(0)
    model = SpatialTransformerClassifier(STNConfig(canvas_size=60))
    out = model(torch.rand(3, 1, 60, 60))
    assert out["logits"].shape == (3, 10) and out["centre"].shape == (3, 2) and out["scale"].shape == (3,)
    assert out["crop"].shape == (3, 1, 28, 28)
    # the transform's last layer starts at zero: centred, one canvas wide
    torch.testing.assert_close(out["centre"], torch.zeros(3, 2))
    torch.testing.assert_close(out["scale"], torch.ones(3))
    with pytest.raises(ValueError, match="images must be"):
        model(torch.rand(3, 1, 50, 50))
    with pytest.raises(ValueError, match="canvas_size must be >= 32"):
        STNConfig(canvas_size=28)


def test_crop_reads_exactly_the_pixels_of_its_box():
    """A crop one pixel per output pixel whose box lies on the pixel grid is a plain slice of the
    canvas (bilinear sampling at pixel centres): the unit convention is envs.coords'."""
    torch.manual_seed(0)
    images = torch.rand(2, 1, 60, 60)
    size, left, top = 20, 10, 30  # a 20x20 box with its top-left pixel at (10, 30)
    centre_px = torch.tensor([[left + size / 2, top + size / 2]] * 2)
    centre = centre_px / 30.0 - 1.0
    out = crop(images, centre, torch.full((2,), size / 60), size)
    torch.testing.assert_close(out, images[:, :, top:top + size, left:left + size])
    # outside the canvas reads as black
    outside = crop(images, torch.tensor([[1.0, 1.0]] * 2), torch.full((2,), size / 60), size)
    assert outside[:, :, size // 2 + 1:, size // 2 + 1:].abs().max() == 0


def test_gradient_reaches_the_localisation_network_through_the_sampler():
    torch.manual_seed(0)
    model = SpatialTransformerClassifier(STNConfig(canvas_size=60))
    with torch.no_grad():  # away from the symmetric start, where the crop is the whole canvas
        model.localisation.transform.bias.copy_(torch.tensor([-0.7, 0.2, -0.1]))
    out = model(torch.rand(4, 1, 60, 60))
    F.cross_entropy(out["logits"], torch.tensor([1, 2, 3, 4])).backward()
    transform = model.localisation.transform
    assert transform.weight.grad.abs().sum() > 0 and transform.bias.grad.abs().sum() > 0
    assert all(p.grad is not None for p in model.localisation.parameters())


def test_the_family_reports_the_crop_as_a_box_in_pixels():
    family = get_family("stn")
    torch.manual_seed(0)
    model = family.build({"canvas_size": 60})
    look = family.run(model, torch.randint(0, 256, (3, 60, 60), dtype=torch.uint8).numpy(), {"canvas_size": 60})
    assert look.attention.centres.shape == (3, 1, 2) and look.attention.boxes.shape == (3, 1, 1)
    torch.testing.assert_close(look.attention.boxes, torch.full((3, 1, 1), 60.0))
    cost = family.pixels_read({"canvas_size": 60}, model.config.to_dict())
    assert cost == {"sensor_values": 28 * 28, "canvas_pixels_touched": 56 * 56 + 4 * 28 * 28, "input_pixels": 3600}


@pytest.mark.parametrize("size", [60, 100])
def test_the_localisation_network_reads_exactly_its_field(size):
    """Its field, counted in the pixels it reads, is what its output depends on: pixels beyond it
    change nothing, and the field's last row and column do."""
    torch.manual_seed(0)
    net = LocalisationNetwork(size, channels=4, hidden=8).double()
    torch.nn.init.normal_(net.transform.weight)  # the zero start would hide every dependence
    field, images = LocalisationNetwork.field(size), torch.rand(1, 1, size, size, dtype=torch.float64)
    assert field < size
    outside = images.clone()
    outside[..., field:, :] = outside[..., :, field:] = 5.0
    edge_row, edge_column = images.clone(), images.clone()
    edge_row[..., field - 1, :field] += 5.0
    edge_column[..., :field, field - 1] += 5.0

    def read(x):
        centre, scale = net(x)
        return torch.cat([centre, scale[:, None]], -1)
    torch.testing.assert_close(read(outside), read(images), rtol=0, atol=0)
    assert not torch.equal(read(edge_row), read(images)) and not torch.equal(read(edge_column), read(images))
