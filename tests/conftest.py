import pytest
import torch

import envs  # noqa: F401 - registers the environments

torch.set_num_threads(1)  # small tensors: threads only add noise on 2 cores


@pytest.fixture(autouse=True)
def denormals_as_torch_leaves_them():
    """Training and the commands flush denormal floats to zero for the whole process
    (glimpse.cpu.configure_cpu); each test starts from torch's default, whatever ran before it."""
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)


@pytest.fixture
def bundled():
    from envs.data import load_bundled_subset

    return load_bundled_subset()


@pytest.fixture
def interrupt_at_step(monkeypatch):
    """``interrupt_at_step(k)``: train.py's loop raises KeyboardInterrupt (as Ctrl-C) when it reaches
    step k; ``interrupt_at_step(None)`` lets it run again."""
    from glimpse.training import loop

    real = loop.batch_indices

    def interrupt(at):
        def batch_indices(seed, step, *rest):
            if step == at:
                raise KeyboardInterrupt
            return real(seed, step, *rest)
        monkeypatch.setattr(loop, "batch_indices", real if at is None else batch_indices)
    return interrupt
