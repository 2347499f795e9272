"""Gymnasium environments of cluttered-translated MNIST seen through a glimpse sensor.

``import envs`` registers (namespace ``glimpse``; ``-v1``: the benchmark version, see
``envs.task.BENCHMARK_VERSION``):

=====================================  ======  =======  =========================  ========  ======
id                                     canvas  clutter  sensor (g x g, k scales)   glimpses  digits
=====================================  ======  =======  =========================  ========  ======
glimpse/MNIST-v1                       28      0        8x8, 1 (digit centred)     6         1
glimpse/TranslatedMNIST60-v1           60      0        12x12, 3                   6         1
glimpse/ClutteredMNIST60-v1            60      4        12x12, 3                   6         1
glimpse/ClutteredMNIST100-v1           100     8        12x12, 4                   8         1
glimpse/ClutteredTwoDigitMNIST100-v1   100     8        12x12, 4                   8 + 8     2
=====================================  ======  =======  =========================  ========  ======

``n_glimpses`` counts glimpses per digit: a two-digit episode has 16 steps. Its label action is a
pair of classes, left digit first (Ba et al. 2015's task, read as a sequence); the reward is 1
only when both are right.

Every entry of :class:`envs.task.GlimpseTask` can be overridden as a keyword of
``gymnasium.make`` / ``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``, and
both take ``device=`` (where the engine runs: canvases, glimpses and episodes). The vector env
returns torch tensors on that device (``envs.TorchToNumpy`` gives numpy); the single env speaks
numpy whatever its device.
"""
from __future__ import annotations

import gymnasium

from envs.cluttered_mnist import ClutteredMNISTEnv
from envs.task import GlimpseTask
from envs.engine import EpisodeEngine
from envs.task import BENCHMARK_VERSION, TASKS
from envs.vector import ClutteredMNISTVectorEnv, TorchToNumpy

# env id -> the task it serves (envs/task.py's table, shared with train.py's presets)
ENV_IDS = {
    "glimpse/MNIST-v1": "mnist28",
    "glimpse/TranslatedMNIST60-v1": "translated60",
    "glimpse/ClutteredMNIST60-v1": "cluttered60",
    "glimpse/ClutteredMNIST100-v1": "cluttered100",
    "glimpse/ClutteredTwoDigitMNIST100-v1": "multi100",
}
ENV_TASKS = {env_id: TASKS[name] for env_id, name in ENV_IDS.items()}

for _env_id, _kwargs in ENV_TASKS.items():
    if _env_id not in gymnasium.registry:
        gymnasium.register(
            id=_env_id,
            entry_point="envs.cluttered_mnist:ClutteredMNISTEnv",
            vector_entry_point="envs.vector:ClutteredMNISTVectorEnv",
            kwargs=dict(_kwargs),  # a copy: a process that edits envs.TASKS does not change what an id makes
        )

__all__ = ["ClutteredMNISTEnv", "ClutteredMNISTVectorEnv", "EpisodeEngine", "GlimpseTask", "TorchToNumpy",
           "BENCHMARK_VERSION", "ENV_IDS", "ENV_TASKS", "TASKS"]
