"""The benchmark's fixed validation and test canvases (version envs.BENCHMARK_VERSION) are the same
on every machine: drawn by the engine on the CPU from fixed seeds, checked here by their hashes.
A change to the canvas recipe or to the draw order changes these hashes: it is a new benchmark
version (new env ids, every shipped checkpoint re-scored), never a silent edit."""
import os
from pathlib import Path

import pytest

from envs.data import load_bundled_subset, load_mnist
from envs.engine import canvas_digest
from envs.task import BENCHMARK_VERSION, TASKS, GlimpseTask
from glimpse.benchmark import TEST_SET_HASHES, fixed_set

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("GLIMPSE_DATA") or str(ROOT.parent / "shared" / "datasets")
HAS_MNIST = (Path(DATA) / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file()

DIGESTS = {  # benchmark v1
    ("full", "mnist28", "val"): "0b11588dc7333964",
    ("full", "translated60", "val"): "1c87a70cdb318ee6",
    ("full", "cluttered60", "val"): "8beb372889e13149",
    ("full", "cluttered100", "val"): "9f645d4c1d02bf5d",
    ("full", "multi100", "val"): "dfef772426cbe041",
    ("bundled", "mnist28", "val"): "e064766d42164131",
    ("bundled", "mnist28", "test"): "5989f0d9dc30fe05",
    ("bundled", "translated60", "val"): "1f68bec165b4f6e5",
    ("bundled", "translated60", "test"): "d562330e881d78bd",
    ("bundled", "cluttered60", "val"): "db8f44922915d390",
    ("bundled", "cluttered60", "test"): "f1df756692888e23",
    ("bundled", "cluttered100", "val"): "4b857e63e30dce7d",
    ("bundled", "cluttered100", "test"): "e12b8cbe24b612fc",
    ("bundled", "multi100", "val"): "f5efbae9173bde33",
    ("bundled", "multi100", "test"): "1cbf30ef91013159",
    **{("full", task, "test"): digest for task, digest in TEST_SET_HASHES.items()},  # the leaderboard's check
}


def digests(data, source: str):
    for task_name, settings in TASKS.items():
        task = GlimpseTask(**settings).to_dict()
        for split in ("val", "test"):
            yield (source, task_name, split), canvas_digest(fixed_set(task, data.split(split), split)[0])


def test_this_is_benchmark_v1():
    assert BENCHMARK_VERSION == 1


def test_bundled_sets_match_their_hashes():
    for key, digest in digests(load_bundled_subset(), "bundled"):
        assert digest == DIGESTS[key], key


@pytest.mark.skipif(not HAS_MNIST, reason=f"full MNIST not found in {DATA} (set $GLIMPSE_DATA to a folder holding MNIST/raw)")
def test_full_mnist_sets_match_their_hashes():
    for key, digest in digests(load_mnist(DATA), "full"):
        assert digest == DIGESTS[key], key
