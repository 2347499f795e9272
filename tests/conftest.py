import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import envs  # noqa: E402,F401 - registers the environments

torch.set_num_threads(1)  # small tensors: threads only add noise on 2 cores


@pytest.fixture
def bundled():
    from envs.data import load_bundled_subset

    return load_bundled_subset()
