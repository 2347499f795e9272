"""Conv stacks run channels-last (glimpse/models/channels_last.py): the same network as the plain
layout, names, values and gradients, so checkpoints of either layout load into the other."""
import pytest
import torch
from torch import nn

from glimpse.models import get_family
from glimpse.models.channels_last import ChannelsLast
from glimpse.models.ram.context import ContextNetwork
from glimpse.models.ram.glimpse_network import ConvWhat
from glimpse.models.resnet import ResNetClassifier, ResNetConfig
from glimpse.models.sat_encoder import ConvEncoder
from glimpse.training.config import TrainConfig


def _layers():
    return [nn.Conv2d(2, 8, 5, stride=2, padding=2), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 3)]


def test_a_channels_last_stack_is_the_plain_stack():
    torch.manual_seed(0)
    fast = ChannelsLast(*_layers())
    plain = nn.Sequential(*_layers())
    plain.load_state_dict(fast.state_dict())  # the same names: either layout's checkpoint loads
    assert fast[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not plain[0].weight.is_contiguous(memory_format=torch.channels_last)
    images = torch.rand(6, 2, 20, 20, dtype=torch.float64)
    fast, plain = fast.double(), plain.double()
    out_fast, out_plain = fast(images), plain(images)
    torch.testing.assert_close(out_fast, out_plain)
    out_fast.square().sum().backward()
    out_plain.square().sum().backward()
    for (name, a), b in zip(fast.named_parameters(), plain.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)
    # and back: a plain checkpoint loads into the fast stack and keeps its layout
    fast.load_state_dict(plain.state_dict())
    assert fast[0].weight.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("build", [
    lambda: ResNetClassifier(ResNetConfig(canvas_size=60)),
    ConvEncoder,
    lambda: ContextNetwork(50, 16, "lstm"),
    lambda: ConvWhat(3, 12, 16),
], ids=["resnet", "sat-encoder", "context", "conv-what"])
def test_the_conv_stacks_store_their_weights_channels_last(build):
    convs = [m for m in build().modules() if isinstance(m, nn.Conv2d)]
    assert convs and all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convs)


def test_the_spatial_transformer_convolves_channels_last():
    family = get_family("stn")
    model = family.build(family.model_config(TrainConfig(mode="soft", arch="stn", preset="cluttered60")))
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 4 and all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convs)
