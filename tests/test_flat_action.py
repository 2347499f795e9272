"""envs.flat_action: the flat Box action (and flattened observation) for off-the-shelf agents."""
import importlib.util
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.flat_action import FlatAction, GridAction, grid_points, make_flat

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sb3_ppo.py"


def env_id(task: str) -> str:
    """The registered id serving ``task`` (ids carry a version suffix that may change)."""
    return next(i for i, name in envs.ENV_IDS.items() if name == task)


def flat_action(location, labels, scale=1.0):
    """A flat action whose scores put ``scale`` on each wanted label and -scale elsewhere."""
    scores = np.full((len(labels), 10), -scale, np.float32)
    scores[np.arange(len(labels)), labels] = scale
    return np.concatenate([np.asarray(location, np.float32), scores.ravel()])


@pytest.mark.parametrize("task, n_digits", [("mnist28", 1), ("multi100", 2)])
def test_check_env_passes_on_flat_env(task, n_digits):
    env = make_flat(env_id(task), data_dir="bundled")
    base = env.unwrapped
    glimpse_size = base.observation_space["glimpse"].shape
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (2 + 10 * n_digits,), np.float32)
    assert env.observation_space.shape == (int(np.prod(glimpse_size)) + 2,)
    assert env.observation_space.dtype == np.float32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    # the only complaint allowed is the one every wrapped env gets
    problems = [str(w.message) for w in caught if "different from the unwrapped version" not in str(w.message)]
    assert problems == []
    env.close()


def test_flattened_observation_is_glimpse_then_location():
    dict_env = FlatAction(gym.make(env_id("mnist28"), data_dir="bundled"))
    flat_env = make_flat(env_id("mnist28"), data_dir="bundled")
    obs, _ = dict_env.reset(seed=3)
    flat, _ = flat_env.reset(seed=3)
    np.testing.assert_array_equal(flat, np.concatenate([obs["glimpse"].ravel(), obs["location"]]))
    action = flat_action([0.25, -0.5], [4])
    obs, *_ = dict_env.step(action)
    flat, *_ = flat_env.step(action)
    np.testing.assert_array_equal(flat[-2:], [0.25, -0.5])
    np.testing.assert_array_equal(flat, np.concatenate([obs["glimpse"].ravel(), obs["location"]]))


def test_flat_action_maps_to_location_and_argmax_label_per_digit():
    one = FlatAction(gym.make(env_id("mnist28"), data_dir="bundled"))
    action = flat_action([0.5, -0.25], [7], scale=0.3)
    mapped = one.action(action)
    np.testing.assert_array_equal(mapped["location"], np.float32([0.5, -0.25]))
    assert mapped["location"].dtype == np.float32 and mapped["label"] == 7
    assert one.unwrapped.action_space.contains(mapped)

    two = FlatAction(gym.make(env_id("multi100"), data_dir="bundled"))
    scores = np.zeros((2, 10), np.float32)
    scores[0, 3], scores[1, 9] = 0.9, 0.1  # argmax per row, not over both digits together
    mapped = two.action(np.concatenate([np.float32([-1.0, 1.0]), scores.ravel()]))
    np.testing.assert_array_equal(mapped["location"], [-1.0, 1.0])
    np.testing.assert_array_equal(mapped["label"], [3, 9])
    assert mapped["label"].dtype == np.int64
    assert two.unwrapped.action_space.contains(mapped)


@pytest.mark.parametrize("task", ["mnist28", "multi100"])
def test_flat_label_is_what_the_env_judges(task):
    """Play an episode, learn the true label(s), replay the same seed with them: reward 1."""
    env = FlatAction(gym.make(env_id(task), data_dir="bundled"))
    n_digits = env.n_digits

    def play(labels):
        env.reset(seed=11)
        for _ in range(env.unwrapped.task.episode_length):
            obs, reward, terminated, truncated, info = env.step(flat_action([0.1, -0.1], labels))
            if not terminated:
                np.testing.assert_array_equal(obs["location"], np.float32([0.1, -0.1]))
        assert terminated
        return reward, np.atleast_1d(info["label"])

    _, truth = play([0] * n_digits)
    reward, _ = play(list(truth))
    assert reward == 1.0
    wrong = list(truth)
    wrong[-1] = (wrong[-1] + 1) % 10  # one digit wrong: no reward
    assert play(wrong)[0] == 0.0


@pytest.mark.parametrize("shape", [(11,), (13,), (22,), (1, 12), (4, 12), ()])
def test_wrong_shape_raises_value_error_naming_shapes(shape):
    env = FlatAction(gym.make(env_id("mnist28"), data_dir="bundled"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(12,\).*got shape " + re.escape(str(shape))):
        env.step(np.zeros(shape, np.float32))


def test_two_digit_env_wants_22_numbers():
    env = FlatAction(gym.make(env_id("multi100"), data_dir="bundled"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(22,\).*2 digit\(s\).*got shape \(12,\)"):
        env.step(np.zeros(12, np.float32))


def test_bad_values_raise_value_error():
    env = FlatAction(gym.make(env_id("mnist28"), data_dir="bundled"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="location.*must lie in \\[-1, 1\\]"):
        env.step(flat_action([1.5, 0.0], [0]))
    bad = flat_action([0.0, 0.0], [0])
    bad[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        env.step(bad)
    with pytest.raises(ValueError, match="real numbers"):
        env.step(np.array(["a"] * 12))
    env.step(flat_action([0.0, 0.0], [0]))  # the episode is untouched by the rejected actions


def test_flat_action_rejects_a_non_dict_action_space():
    with pytest.raises(TypeError, match="Dict action space"):
        FlatAction(gym.make("CartPole-v1"))


def load_example():
    spec = importlib.util.spec_from_file_location("sb3_ppo_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@pytest.mark.parametrize("task, n_digits", [("mnist28", 1), ("multi100", 2)])
def test_grid_action_and_stacked_observation_pass_check_env(task, n_digits):
    env = make_flat(env_id(task), grid=5, stack=3, data_dir="bundled")
    glimpse = int(np.prod(env.unwrapped.observation_space["glimpse"].shape))
    assert env.action_space == gym.spaces.MultiDiscrete([5, 5] + [10] * n_digits)
    assert env.observation_space.shape == (3, glimpse + 2) and env.observation_space.dtype == np.float32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught if "different from the unwrapped version" not in str(w.message)] == []


def test_grid_action_maps_indices_to_grid_points_and_classes():
    np.testing.assert_array_equal(grid_points(5), np.float32([-1, -0.5, 0, 0.5, 1]))
    np.testing.assert_array_equal(grid_points(1), [0.0])
    one = GridAction(gym.make(env_id("mnist28"), data_dir="bundled"), grid=5)
    mapped = one.action(np.array([0, 3, 7]))
    np.testing.assert_array_equal(mapped["location"], np.float32([-1.0, 0.5]))
    assert mapped["location"].dtype == np.float32 and mapped["label"] == 7
    assert one.unwrapped.action_space.contains(mapped)
    two = GridAction(gym.make(env_id("multi100"), data_dir="bundled"), grid=3)
    mapped = two.action(np.array([2, 1, 3, 9]))
    np.testing.assert_array_equal(mapped["location"], [1.0, 0.0])
    np.testing.assert_array_equal(mapped["label"], [3, 9])
    assert two.unwrapped.action_space.contains(mapped)


@pytest.mark.parametrize("bad, message", [(np.array([0, 5, 1]), "below \\[5, 5, 10\\]"),
                                          (np.array([0, -1, 1]), "below"), (np.array([0.5, 1, 1]), "integer"),
                                          (np.array([0, 1]), "shape \\(3,\\)")])
def test_grid_action_rejects_what_it_cannot_map(bad, message):
    env = GridAction(gym.make(env_id("mnist28"), data_dir="bundled"), grid=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(bad)
    env.step(np.array([2, 2, 0]))  # the episode is untouched by the rejected actions


@pytest.mark.parametrize("kwargs, message", [(dict(grid=0), "grid must be"), (dict(grid=2.5), "grid must be"),
                                             (dict(stack=0), "stack must be"), (dict(stack=True), "stack must be")])
def test_make_flat_refuses_bad_grid_or_stack(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_flat(env_id("mnist28"), data_dir="bundled", **kwargs)


def test_stacked_observation_is_oldest_first_with_zeros_before_the_first():
    single = make_flat(env_id("mnist28"), grid=5, data_dir="bundled")
    stacked = make_flat(env_id("mnist28"), grid=5, stack=6, data_dir="bundled")
    seen = [single.reset(seed=4)[0]]
    obs, _ = stacked.reset(seed=4)
    np.testing.assert_array_equal(obs[:5], 0.0)
    np.testing.assert_array_equal(obs[5], seen[0])
    for x in range(3):
        action = np.array([x, 4 - x, 0])
        seen.append(single.step(action)[0])
        obs = stacked.step(action)[0]
    np.testing.assert_array_equal(obs[2:], np.stack(seen))
    np.testing.assert_array_equal(obs[:2], 0.0)


class _StubPolicy:
    """A deterministic policy of the whole stacked observation, in SB3's ``predict`` shape."""

    def predict(self, observation, deterministic=True):
        observation = np.asarray(observation, np.float64)
        batched = observation if observation.ndim == 3 else observation[None]
        code = np.abs((batched * np.arange(1, batched.shape[-1] + 1)).sum(-1) * np.arange(1, batched.shape[1] + 1))
        total = code.sum(1)
        action = np.stack([total.astype(np.int64) % 5, (total * 7).astype(np.int64) % 5,
                           (total * 13).astype(np.int64) % 10], 1)
        return (action if observation.ndim == 3 else action[0]), None


def test_example_agent_sees_on_the_benchmark_what_the_policy_saw_in_training():
    """score_agent through the vector env and the stacked single env, canvas by canvas, agree."""
    from glimpse.benchmark import _canvases, score_agent

    example = load_example()
    task = dict(envs.ENV_TASKS[env_id("mnist28")])
    canvases, *_ = _canvases(task, "test", None, "bundled", 40)
    env = make_flat(env_id("mnist28"), grid=5, stack=6, split="test", data_dir="bundled")
    rewards = []
    for image, label in zip(canvases.images, canvases.labels):
        obs, _ = env.reset(seed=0, options={"canvas": image, "label": label})
        for _ in range(6):
            obs, reward, *_ = env.step(_StubPolicy().predict(obs)[0])
        rewards.append(reward)
    result = score_agent(example.PolicyAgent(_StubPolicy(), grid=5, stack=6), "mnist28", data_dir="bundled",
                         limit=40, batch_size=16)
    assert 0 < sum(rewards) < 40  # the stub is neither always right nor always wrong
    assert result.error == pytest.approx(1 - np.mean(rewards))


@pytest.mark.parametrize("argv, message", [(["--grid", "0"], "--grid must be an integer in 1..64"),
                                           (["--steps", "0"], "--steps must be >= 1")])
def test_the_example_refuses_bad_options_with_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        load_example().main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_sb3_ppo_example_trains_and_is_scored_on_the_benchmark(capsys):
    """CI installs the sb3 extra, so this runs there: a short PPO run through the flat wrappers, then
    the policy driven by glimpse.benchmark.score_agent through the vector env (observations only)."""
    pytest.importorskip("stable_baselines3")
    load_example().main(["--steps", "256", "--seed", "1", "--eval-episodes", "10", "--benchmark-limit", "100"])
    out = capsys.readouterr().out
    assert "benchmark: error " in out and "on 100 fixed test canvases of mnist28" in out and "6 glimpses" in out
