"""Hard-mode training never leaves the device during an episode: from the canvases to the last
step, nothing reads a tensor value on the host and nothing builds a tensor from Python data (on
a GPU that is a blocking host -> device copy); on CPU every such read or build is counted, on a
GPU torch's sync debug mode turns a synchronisation into an error."""
import contextlib

import numpy as np
import pytest
import torch

from envs.data import load_bundled_subset
from glimpse.models import list_families
from glimpse.training.config import resolve_config
from glimpse.training.hard import HardAttentionLearner
from glimpse.training.loop import make_learner

# the ways a tensor's value reaches Python: each is a device -> host copy that waits for the device
HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__", "__array__")
# the ways Python data becomes a tensor on the model's device: on a GPU a blocking copy from host memory
# (without device= they build a host tensor, which a non-blocking .to() may then move)
HOST_WRITES = ("tensor", "as_tensor")


@contextlib.contextmanager
def counting_host_reads():
    reads = []
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(name):
        def read(self, *args, **kwargs):
            reads.append(name)
            return originals[name](self, *args, **kwargs)
        return read

    builders = {name: getattr(torch, name) for name in HOST_WRITES}

    def counted_build(name):
        def build(data, *args, **kwargs):
            if not isinstance(data, torch.Tensor) and kwargs.get("device") is not None:
                reads.append(f"torch.{name}")
            return builders[name](data, *args, **kwargs)
        return build

    for name in HOST_READS:
        setattr(torch.Tensor, name, counted(name))
    for name in HOST_WRITES:
        setattr(torch, name, counted_build(name))
    try:
        yield reads
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        for name, original in builders.items():
            setattr(torch, name, original)


@contextlib.contextmanager
def synchronising_is_an_error():
    """Inside, any host synchronisation on the GPU raises (torch's sync debug mode)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)


def family_config(family):
    return resolve_config({"preset": "cluttered60", "mode": family.mode, "arch": family.name, "batch_size": 16,
                           "data_dir": "bundled"})


def learner(device="cpu", **options):
    config = resolve_config({"preset": "cluttered60", "mode": "hard", "batch_size": 16, "hidden_size": 32,
                             "data_dir": "bundled", **options})
    return HardAttentionLearner(config, load_bundled_subset(), device)


@pytest.mark.parametrize("options", [{}, {"reinforce_samples": 2}, {"first_location": "random"},
                                     {"preset": "multi100", "n_glimpses": 2}])
def test_a_training_episode_reads_nothing_on_the_host(options):
    hard = learner(**options)
    hard.loss(np.arange(16), step_seed=0)  # first call: digits loaded, caches filled
    with counting_host_reads() as reads:
        loss, metrics = hard.loss(np.arange(16, 32), step_seed=1)
        loss.backward()
    assert reads == [], f"host reads inside the episode: {reads}"
    assert torch.isfinite(loss)


@pytest.mark.parametrize("family", list_families(), ids=lambda family: family.name)
def test_every_familys_training_step_reads_nothing_on_the_host(family):
    """Soft families and controls too: ram-diff's retina once built its canvas size from a Python
    list on the device, a blocking copy per glimpse on a GPU."""
    learner = make_learner(family_config(family), load_bundled_subset(), "cpu")
    learner.loss(np.arange(16), step_seed=0)
    with counting_host_reads() as reads:
        loss, _ = learner.loss(np.arange(16, 32), step_seed=1)
        loss.backward()
    assert reads == [], f"host reads inside the {family.name} step: {reads}"


def test_the_counter_sees_a_host_read():
    """The test above can fail: a rollout that branches on a tensor is caught."""
    with counting_host_reads() as reads:
        if torch.ones(()) > 0:
            torch.zeros(2).tolist()
        torch.tensor([1, 2], device="cpu") + torch.as_tensor(torch.ones(2), device="cpu") + torch.tensor([3, 4])
    assert reads == ["__bool__", "tolist", "torch.tensor"]  # Python data built on a device; not the others


def test_the_env_checks_user_actions_only_when_validating():
    """The env a user makes validates values (a clear error); the trainer's env does not read them."""
    from envs import ClutteredMNISTVectorEnv

    user = ClutteredMNISTVectorEnv(4, data_dir="bundled")
    user.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        user.step({"location": torch.full((4, 2), 2.0), "label": torch.zeros(4, dtype=torch.int64)})
    trusted = ClutteredMNISTVectorEnv(4, data_dir="bundled", validate=False)
    trusted.reset(seed=0)
    with counting_host_reads() as reads:
        trusted.step({"location": torch.zeros(4, 2), "label": torch.zeros(4, dtype=torch.int64)})
    assert reads == []
    with pytest.raises(ValueError, match="shape"):  # shapes are still checked, without reading values
        trusted.step({"location": torch.zeros(3, 2), "label": torch.zeros(4, dtype=torch.int64)})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_a_cuda_training_step_does_not_synchronise():
    hard = learner("cuda")
    hard.loss(np.arange(16), step_seed=0)
    with synchronising_is_an_error():
        loss, _ = hard.loss(np.arange(16, 32), step_seed=1)
        loss.backward()


def test_one_place_gives_a_device_its_index_so_cuda_and_cuda_0_are_one_device(monkeypatch):
    """torch.Generator("cuda") keeps the device "cuda" with no index while tensors moved to "cuda"
    land on "cuda:0" (pytorch issue 58545): compared as they come, the canvas maker refused its own
    env's generator. Checked without a GPU: a generator that reports "cuda" against digits that
    report "cuda:0" must pass the device check and go on to the next one."""
    from types import SimpleNamespace

    from envs import engine
    from envs.engine import DigitBank, indexed_device, make_canvases

    assert indexed_device("cuda") == indexed_device("cuda:0") == torch.device("cuda", 0)
    assert indexed_device("cpu") == torch.device("cpu") and indexed_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setattr(DigitBank, "device", property(lambda self: torch.device("cuda", 0)))
    bank = DigitBank(torch.zeros(4, 28, 28, dtype=torch.uint8), torch.zeros(4, dtype=torch.int64))
    generator = SimpleNamespace(device=torch.device("cuda"))

    class PassedTheDeviceCheck(Exception):
        pass

    def next_check(canvas_size):
        raise PassedTheDeviceCheck
    monkeypatch.setattr(engine, "digits_that_fit", next_check)  # what make_canvases asks after the device check
    with pytest.raises(PassedTheDeviceCheck):
        make_canvases(generator, bank, torch.arange(2), 60, 4, False)
    monkeypatch.undo()
    monkeypatch.setattr(DigitBank, "device", property(lambda self: torch.device("cuda", 0)))
    with pytest.raises(ValueError, match="the generator is on cpu but the digits are on cuda:0"):
        make_canvases(SimpleNamespace(device=torch.device("cpu")), bank, torch.arange(2), 60, 4, False)


def test_numpy_integers_are_valid_numbers_of_envs():
    import gymnasium as gym

    env = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=np.int64(4), vectorization_mode="vector_entry_point",
                       data_dir="bundled")
    assert env.num_envs == 4 and type(env.num_envs) is int


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
@pytest.mark.parametrize("family", list_families(), ids=lambda family: family.name)
def test_every_familys_training_step_runs_on_a_gpu_without_synchronising(family):
    """The real-GPU counterpart of tests/test_fake_cuda.py: each family's loss and backward pass
    on cuda:0, with any host synchronisation an error."""
    learner = make_learner(family_config(family), load_bundled_subset(), "cuda")
    learner.loss(np.arange(16), step_seed=0)  # first call: digits moved, caches filled
    with synchronising_is_an_error():
        loss, metrics = learner.loss(np.arange(16, 32), step_seed=1)
        loss.backward()
    assert loss.device.type == "cuda" and {value.device.type for value in metrics.values()} == {"cuda"}
    assert all(p.grad is not None for p in learner.model.parameters() if p.requires_grad)
