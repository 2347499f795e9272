"""The no-attention controls: ResNet-14 and ResNet-18 with a fine stem over the whole canvas, and
Show-Attend-Tell's own encoder and decoder with the attention replaced by mean or max pooling over
the feature cells."""
import pytest
import torch

from glimpse.costs import flops_per_image
from glimpse.models import get_family
from glimpse.models.attention_decoder import AttentionDecoder
from glimpse.models.resnet import ResNetClassifier, ResNetConfig
from glimpse.models.sat_pooled import PooledDecoder, PooledSATConfig
from glimpse.training.config import resolve_config


@pytest.mark.parametrize("preset, size", [("mnist28", 28), ("cluttered60", 60), ("cluttered100", 100)])
@pytest.mark.parametrize("name, depth, parameters, stem", [
    ("resnet", 14, 696_554, (32, 4)),  # the docstring's 0.70 M, at any canvas size; a 5x5 conv and a max-pool
    ("resnet-fine", 18, 701_178, (16, 2)),  # 0.70 M; a 3x3 stride-2 conv, no pooling
])
def test_resnet_shapes_depth_and_parameters(name, depth, parameters, stem, preset, size):
    family = get_family(name)
    model = family.build(family.model_config(resolve_config({"mode": "full", "arch": name, "preset": preset})))
    assert model(torch.rand(3, 1, size, size))["logits"].shape == (3, 10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size != (1, 1)]
    assert len(convs) + 1 == depth  # the stem, two convs per basic block, the classifier (1x1 shortcuts aside)
    assert sum(p.numel() for p in model.parameters()) == parameters
    channels, stride = stem
    assert model.stem(torch.rand(3, 1, size, size)).shape == (3, channels, -(-size // stride), -(-size // stride))
    assert model.stages(model.stem(torch.rand(3, 1, size, size))).shape[2] == -(-size // 16)  # total stride 16
    with pytest.raises(ValueError, match="images must be"):
        model(torch.rand(3, 1, size + 1, size + 1))


def test_resnet_config_checks_its_stem_and_reads_old_checkpoints():
    with pytest.raises(ValueError, match="stem_stride"):
        ResNetConfig(stem_stride=3)
    with pytest.raises(ValueError, match="total stride"):
        ResNetConfig(canvas_size=20, widths=(8, 8, 8, 8), stem_stride=4)
    shipped = {"canvas_size": 60, "widths": [32, 64, 128], "blocks_per_stage": 2, "n_classes": 10}  # before the fine stem
    assert ResNetClassifier(ResNetConfig(**shipped)).config.stem_stride == 4


def test_the_mean_pooled_decoder_is_show_attend_tell_s_with_uniform_attention():
    torch.manual_seed(0)
    features = torch.rand(4, 49, 64)
    pooled = PooledDecoder(64, 32, n_steps=3, pooling="mean")
    attending = AttentionDecoder(64, 32, 16, n_steps=3)
    attending.load_state_dict(pooled.state_dict(), strict=False)  # the shared names: init, gate, cell
    attending.attention.forward = lambda projected, h: torch.full(projected.shape[:2], 1 / 49)  # alpha uniform
    states, _, _ = attending(features)
    torch.testing.assert_close(pooled(features), states)


def test_the_max_pooled_decoder_reads_each_channel_s_largest_cell():
    torch.manual_seed(0)
    features = torch.rand(2, 9, 8)
    decoder = PooledDecoder(8, 16, n_steps=2, pooling="max")
    seen = []
    decoder.cell.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    decoder(features)
    gate = torch.sigmoid(decoder.gate(torch.tanh(decoder.init_h(features.mean(1)))))
    torch.testing.assert_close(seen[0], gate * features.amax(1))


def test_the_controls_are_full_image_families_with_show_attend_tell_s_cost():
    task = {"canvas_size": 60, "n_clutter": 4, "centred_digit": False, "glimpse_size": 12, "n_scales": 3,
            "n_glimpses": 4, "first_location": "centre"}
    sat = get_family("sat").build({"canvas_size": 60, "n_glimpses": 4})
    sat_flops = flops_per_image("sat", sat, task)
    for name in ("sat-mean", "sat-max"):
        family = get_family(name)
        assert family.mode == "full" and not family.has_attention and not family.reads_several_digits
        model = family.build({"canvas_size": 60, "n_glimpses": 4, "pooling": family.pooling})
        assert model.encoder.layers[0].weight.shape == sat.encoder.layers[0].weight.shape  # the same features
        assert 0.8 * sat_flops < flops_per_image(name, model, task) <= sat_flops  # no attention MLP, little else
    with pytest.raises(ValueError, match="one digit per canvas"):
        PooledSATConfig(n_digits=2)
    assert get_family("resnet").mode == "full"
