import pytest
import torch

import envs  # noqa: F401 - registers the environments

torch.set_num_threads(1)  # small tensors: threads only add noise on 2 cores


@pytest.fixture
def bundled():
    from envs.data import load_bundled_subset

    return load_bundled_subset()
