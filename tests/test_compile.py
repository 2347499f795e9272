"""train.py --compile: each part of the model compiled in place, the same losses and checkpoint keys.

The compiler itself is swapped for torch.compile's "eager" backend (dynamo traces every part, no
C++ is built), so the test checks what the flag does to the model and takes seconds; the speed it
buys is measured by benchmarks/speed.py --compile (docs/speed.md)."""
import numpy as np
import pytest
import torch

from envs.data import load_bundled_subset
from glimpse.models import list_families
from glimpse.training.config import resolve_config
from glimpse.training.loop import make_learner


@pytest.fixture
def eager_compile(monkeypatch):
    modes = []
    original = torch.nn.Module.compile

    def compile_eagerly(self, *args, mode=None, **kwargs):
        modes.append(mode)
        return original(self, backend="eager")

    monkeypatch.setattr(torch.nn.Module, "compile", compile_eagerly)
    yield modes
    torch._dynamo.reset()


@pytest.mark.parametrize("family", [f for f in list_families() if f.name in ("ram", "sat")], ids=lambda f: f.name)
def test_compile_compiles_each_part_in_place_and_changes_no_number(eager_compile, family):
    data = load_bundled_subset()

    def loss_and_keys(compile_mode):
        torch.manual_seed(0)
        config = resolve_config({"preset": "cluttered60", "mode": family.mode, "arch": family.name, "batch_size": 8,
                                 "data_dir": "bundled", "compile": compile_mode})
        learner = make_learner(config, data)
        loss, _ = learner.loss(np.arange(8), step_seed=3)
        loss.backward()
        grads = [p.grad.clone() for p in learner.model.parameters() if p.grad is not None]
        return loss.detach(), grads, list(learner.model.state_dict()), learner.model

    plain_loss, plain_grads, plain_keys, _ = loss_and_keys("off")
    assert eager_compile == []
    loss, grads, keys, model = loss_and_keys("reduce-overhead")
    assert eager_compile == ["reduce-overhead"] * len(list(model.children()))
    assert keys == plain_keys  # in place: checkpoints keep their keys (no _orig_mod prefix)
    torch.testing.assert_close(loss, plain_loss)
    for grad, plain in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(grad, plain)


def test_compile_mode_is_checked():
    with pytest.raises(ValueError, match="--compile must be one of"):
        resolve_config({"compile": "fast"})


def test_an_annealed_policy_std_recompiles_nothing(eager_compile):
    """--location-std-final changes the policy's std every step: a compiled location network reads
    it as a tensor, so it is traced once (a Python float made dynamo recompile per value until its
    cache limit, then run eagerly), and the std it returns is the one set."""
    from torch._dynamo.utils import counters

    from glimpse.models.ram.location import LocationPolicy

    torch._dynamo.reset()
    counters.clear()
    policy = LocationPolicy(16, std=0.25)
    policy.compile()
    h = torch.randn(4, 16)
    for std in np.linspace(0.25, 0.1, 12):
        policy.fixed_std = float(std)
        _, returned = policy(h)
        torch.testing.assert_close(returned, torch.full((4, 2), float(std)))
    assert counters["stats"]["unique_graphs"] == 1
    assert list(policy.state_dict()) == ["mean.weight", "mean.bias"]  # checkpoints keep their keys
