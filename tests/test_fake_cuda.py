"""The CUDA path, checked without a GPU: the env and every family's training loss on a faked cuda:0.

Under PyTorch's FakeTensorMode tensors carry a device and a shape but no data, so an op that
mixes devices raises (FakeTensorDeviceMismatchError) and so does a read back to the host
(DataDependentOutputException): a tensor made on the CPU by mistake, or a sync inside an episode,
fails here as it would on a GPU. What cannot run: the backward pass (autograd needs a CUDA
context) and the numbers themselves. Four seams, each as narrow as it can be:

- the CUDA generator: a real CPU generator that reports the device it was asked for, exactly as
  torch.Generator does (``"cuda"`` stays unindexed: pytorch issue 58545), so the engine's check
  of generator against digits still runs;
- ``envs.engine.cuda_available``, the engine's own GPU check (patching ``torch.cuda.is_available``
  for the process would send indexing and pinning down CUDA paths);
- ``glimpse.training.learner.pins_host_memory``: on a machine with a real GPU the trainer pins
  its host copies, and fake tensors have no ``pin_memory``;
- models are built on the device (``Module.to`` cannot run on fake tensors); only the build runs
  under ``torch.device("cuda:0")``, so that context hides no tensor made without a device.

Caches keyed by device are emptied before and after, so no fake tensor outlives its test.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode

import envs.engine
import glimpse.training.learner
from envs import ClutteredMNISTVectorEnv
from envs.data import load_bundled_subset
from glimpse.models import list_families
from glimpse.models.registry import Family
from glimpse.training.config import resolve_config
from glimpse.training.loop import make_learner

CUDA = torch.device("cuda", 0)
REAL_GENERATOR = torch.Generator


class StandInGenerator(REAL_GENERATOR):
    """A CPU generator that reports the device it was made for, as torch.Generator(device) would."""

    def __new__(cls, device="cpu"):
        generator = super().__new__(cls, "cpu")
        generator._claimed = torch.device(device)
        return generator

    def __init__(self, device="cpu"):
        pass

    @property
    def device(self) -> torch.device:
        return self._claimed


def clear_device_caches() -> None:
    """Every cache of the project's modules (the digit banks, functools caches keyed by device)."""
    envs.engine._BANKS.clear()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("envs", "glimpse"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


@pytest.fixture
def fake_cuda(monkeypatch):
    clear_device_caches()
    monkeypatch.setattr(torch, "Generator", StandInGenerator)
    monkeypatch.setattr(envs.engine, "cuda_available", lambda: True)
    monkeypatch.setattr(glimpse.training.learner, "pins_host_memory", lambda device: False)
    original_build = Family.build

    def build_on_device(self, model_config):
        with torch.device(CUDA):
            return original_build(self, model_config)

    monkeypatch.setattr(Family, "build", build_on_device)
    with FakeTensorMode(allow_non_fake_inputs=True):  # numpy digits become (fake) CPU tensors, then move
        yield
    clear_device_caches()


def learner_on_fake_cuda(family: Family, preset: str = "cluttered60"):
    config = resolve_config({"preset": preset, "mode": family.mode, "arch": family.name, "batch_size": 8,
                             "data_dir": "bundled"})
    return make_learner(config, load_bundled_subset(), "cuda")


@pytest.mark.parametrize("task", ["mnist28", "cluttered100", "multi100"])
def test_the_vector_env_plays_on_fake_cuda(fake_cuda, task):
    env = ClutteredMNISTVectorEnv(4, device="cuda", validate=False, data_dir="bundled", **envs.TASKS[task])
    observation, _ = env.reset(seed=0)
    assert {value.device for value in observation.values()} == {CUDA}
    labels = torch.zeros((4,) + env.single_action_space["label"].shape, dtype=torch.int64, device=CUDA)
    for _ in range(env.task.episode_length):
        observation, reward, terminated, truncated, _ = env.step(
            {"location": torch.zeros(4, 2, device=CUDA), "label": labels})
        assert {value.device for value in observation.values()} == {CUDA}
    assert reward.device == terminated.device == CUDA


@pytest.mark.parametrize("family", list_families(), ids=lambda family: family.name)
def test_every_familys_training_loss_runs_on_fake_cuda(fake_cuda, family):
    learner = learner_on_fake_cuda(family)
    assert {p.device for p in learner.model.parameters()} == {CUDA}
    loss, metrics = learner.loss(np.arange(8), step_seed=0)
    assert loss.device == CUDA and loss.shape == ()
    assert {value.device for value in metrics.values()} == {CUDA}


@pytest.mark.parametrize("family", [f for f in list_families() if f.learns_by_reinforce], ids=lambda f: f.name)
def test_every_hard_family_reads_two_digits_on_fake_cuda(fake_cuda, family):
    loss, _ = learner_on_fake_cuda(family, "multi100").loss(np.arange(8), step_seed=0)
    assert loss.device == CUDA


def test_the_fake_device_catches_a_cpu_tensor_and_a_host_read(fake_cuda, monkeypatch):
    """The tests above can fail: targets left on the CPU, and a loss read on the host, both raise."""
    import glimpse.training.soft as soft

    family = next(f for f in list_families() if not f.learns_by_reinforce)
    learner = learner_on_fake_cuda(family)
    cross_entropy = soft.F.cross_entropy
    with monkeypatch.context() as planted:  # the targets made on the CPU
        planted.setattr(soft.F, "cross_entropy", lambda logits, labels, **k: cross_entropy(logits, labels.cpu(), **k))
        with pytest.raises(RuntimeError, match="device"):
            learner.loss(np.arange(8), step_seed=0)
    with monkeypatch.context() as planted:
        planted.setattr(soft.F, "cross_entropy", lambda *a, **k: cross_entropy(*a, **k) * float(a[0].sum() > 0))
        with pytest.raises(DataDependentOutputException):
            learner.loss(np.arange(8), step_seed=0)
    learner.loss(np.arange(8), step_seed=0)  # and without the planted bugs it runs


def test_the_stand_in_generator_keeps_an_unindexed_device_unindexed():
    """Bug 1's shape: the seam does not index a generator made on "cuda" behind the engine's back."""
    assert StandInGenerator("cuda").device == torch.device("cuda")
    assert StandInGenerator().device == torch.device("cpu")
    assert isinstance(StandInGenerator("cuda"), REAL_GENERATOR)
