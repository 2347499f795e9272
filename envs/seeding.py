"""How both environments seed their episode engine from Gymnasium's ``np_random``, and undo a
reset that fails, so that a bad reset option changes nothing (docs/environments.md#errors)."""
from __future__ import annotations

import copy
from contextlib import contextmanager

import torch


def seed_engine(env, generator: torch.Generator, seed: int | None) -> None:
    """After ``super().reset(seed=seed)``: ``np_random``, which Gymnasium seeded, seeds the engine's
    torch ``generator``, on the first reset and whenever a seed is given."""
    if seed is not None or not env._generator_seeded:
        generator.manual_seed(int(env.np_random.integers(2**62)))
        env._generator_seeded = True


@contextmanager
def unchanged_on_error(env, generator: torch.Generator):
    """A reset that raises leaves ``env`` as it was: ``np_random`` and its seed, the engine's
    ``generator`` and whether it was seeded. It copies the generators' states (a few kilobytes,
    on the host) once per reset."""
    saved = (copy.deepcopy(env._np_random), env._np_random_seed, env._generator_seeded, generator.get_state())
    try:
        yield
    except BaseException:
        env._np_random, env._np_random_seed, env._generator_seeded, state = saved
        generator.set_state(state)
        raise
