import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import envs
from envs import TorchToNumpy
from envs.task import GlimpseTask

IDS = sorted(envs.ENV_TASKS)


def make(env_id, **kwargs):
    return gym.make(env_id, data_dir="bundled", **kwargs)


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id):
    env = make(env_id, render_mode="rgb_array")
    check_env(env.unwrapped)


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_follow_the_spec(env_id):
    env = make(env_id)
    spec = envs.ENV_TASKS[env_id]
    k, g = spec["n_scales"], spec["glimpse_size"]
    assert env.observation_space["glimpse"].shape == (k, g, g)
    assert env.observation_space["location"].shape == (2,)
    n_digits = spec.get("n_digits", 1)
    label_space = env.action_space["label"]
    if n_digits == 1:
        assert label_space == gym.spaces.Discrete(10)
    else:
        assert label_space == gym.spaces.MultiDiscrete([10] * n_digits)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info == {}


def play(env, seed, locations):
    obs, _ = env.reset(seed=seed)
    frames = [obs]
    for loc in locations:
        obs, reward, terminated, truncated, info = env.step({"location": np.asarray(loc, np.float32), "label": 3})
        frames.append(obs)
    return frames, reward, terminated, info


def test_episode_protocol_and_reward():
    env = make("glimpse/ClutteredMNIST60-v1")
    locations = [(0.1 * t, -0.1 * t) for t in range(6)]
    frames, reward, terminated, info = play(env, 0, locations)
    assert terminated and "label" in info and reward == float(info["label"] == 3)
    # the label is only revealed at the end
    env.reset(seed=0)
    for t in range(5):
        _, r, term, trunc, info = env.step({"location": np.zeros(2, np.float32), "label": 0})
        assert not term and not trunc and r == 0.0 and "label" not in info
    _, _, term, _, info = env.step({"location": np.zeros(2, np.float32), "label": info.get("label", 0)})
    assert term
    np.testing.assert_allclose(frames[1]["location"], locations[0])


def test_reward_is_one_for_the_right_label():
    env = make("glimpse/MNIST-v1")
    env.reset(seed=5)
    for _ in range(5):
        env.step({"location": np.zeros(2, np.float32), "label": 0})
    truth = env.unwrapped._episodes.labels[0]
    _, reward, term, _, info = env.step({"location": np.zeros(2, np.float32), "label": int(truth)})
    assert term and reward == 1.0 and info["label"] == truth


def test_seeded_episodes_are_reproducible():
    a, b = make("glimpse/ClutteredMNIST100-v1"), make("glimpse/ClutteredMNIST100-v1")
    locs = [(0.5, 0.5)] * 8
    fa, ra, _, ia = play(a, 123, locs)
    fb, rb, _, ib = play(b, 123, locs)
    for x, y in zip(fa, fb):
        np.testing.assert_array_equal(x["glimpse"], y["glimpse"])
    assert ia["label"] == ib["label"]
    fc, *_ = play(a, 124, locs)
    assert not np.array_equal(fa[0]["glimpse"], fc[0]["glimpse"])


def test_first_location_option():
    env = make("glimpse/ClutteredMNIST60-v1")
    obs, _ = env.reset(seed=0, options={"first_location": "centre"})
    np.testing.assert_array_equal(obs["location"], [0, 0])
    obs, _ = env.reset(seed=0, options={"first_location": "random"})
    assert np.any(obs["location"] != 0)


def test_vector_env_matches_single_env_on_same_canvas_and_locations(bundled):
    rng = np.random.default_rng(0)
    n = 4
    vec = TorchToNumpy(gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=n,
                                    vectorization_mode="vector_entry_point", data_dir="bundled"))
    vec.reset(seed=3)
    canvases = vec.unwrapped.engine.canvases.numpy().copy()
    labels = vec.unwrapped.engine.labels.numpy().copy()
    path = rng.uniform(-1, 1, size=(6, n, 2)).astype(np.float32)
    obs, _ = vec.reset(options={"images": canvases, "labels": labels, "first_location": path[0]})
    vec_glimpses = [obs["glimpse"].copy()]
    for t in range(1, 6):
        obs, *_ = vec.step({"location": path[t], "label": np.zeros(n, np.int64)})
        vec_glimpses.append(obs["glimpse"].copy())
    single = make("glimpse/ClutteredMNIST60-v1")
    for i in range(n):
        obs, _ = single.reset(options={"canvas": canvases[i], "label": labels[i], "first_location": path[0, i]})
        np.testing.assert_array_equal(obs["glimpse"], vec_glimpses[0][i])
        for t in range(1, 6):
            obs, *_ = single.step({"location": path[t, i], "label": 0})
            np.testing.assert_array_equal(obs["glimpse"], vec_glimpses[t][i])


def test_vector_env_episode_and_autoreset():
    n = 8
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=n, vectorization_mode="vector_entry_point",
                       data_dir="bundled")
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = vec.reset(seed=0)  # torch tensors on the env's device
    assert obs["glimpse"].shape == (n, 3, 12, 12) and obs["glimpse"].dtype == torch.float32
    assert obs["glimpse"].device.type == "cpu" and obs["location"].shape == (n, 2)
    vec = TorchToNumpy(vec)
    obs, _ = vec.reset(seed=0)
    assert isinstance(obs["glimpse"], np.ndarray) and obs["glimpse"].dtype == np.float32
    action = {"location": np.zeros((n, 2), np.float32), "label": np.zeros(n, np.int64)}
    for t in range(6):
        obs, reward, term, trunc, info = vec.step(action)
    assert term.all() and not trunc.any()
    np.testing.assert_array_equal(reward, (info["label"] == 0).astype(float))
    obs, reward, term, trunc, info = vec.step(action)  # NEXT_STEP autoreset
    assert not term.any() and np.all(reward == 0) and "label" not in info
    # seeded vector resets reproduce
    a, _ = vec.reset(seed=11)
    b, _ = vec.reset(seed=11)
    np.testing.assert_array_equal(a["glimpse"], b["glimpse"])


def test_vector_env_accepts_digit_indices():
    vec = gym.make_vec("glimpse/MNIST-v1", num_envs=3, vectorization_mode="vector_entry_point", data_dir="bundled")
    vec.reset(seed=0, options={"indices": np.array([0, 1, 2])})
    engine = vec.unwrapped.engine
    torch.testing.assert_close(engine.labels, engine.bank.labels[:3])


BAD_ACTIONS = [
    ({"location": np.array([1.5, 0], np.float32), "label": 0}, ValueError, r"\[-1, 1\]"),
    ({"location": np.array([np.nan, 0], np.float32), "label": 0}, ValueError, "NaN"),
    ({"location": np.zeros(3, np.float32), "label": 0}, ValueError, "shape"),
    ({"location": np.zeros(2, bool), "label": 0}, TypeError, "floating"),
    ({"location": np.zeros(2, np.float32), "label": 10}, ValueError, "0..9"),
    ({"location": np.zeros(2, np.float32), "label": 1.5}, TypeError, "integer"),
    ({"location": np.zeros(2, np.float32)}, ValueError, "keys"),
    ([0.0, 0.0], ValueError, "dict"),
]


@pytest.mark.parametrize("action,error,match", BAD_ACTIONS)
def test_bad_actions_are_named_and_change_nothing(action, error, match):
    env = make("glimpse/ClutteredMNIST60-v1")
    env.reset(seed=0)
    t_before = env.unwrapped._episodes.t
    with pytest.raises(error, match=match):
        env.unwrapped.step(action)
    assert env.unwrapped._episodes.t == t_before
    env.unwrapped.step({"location": np.zeros(2, np.float32), "label": 0})  # still usable


def test_vector_bad_action_shape():
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=4, vectorization_mode="vector_entry_point",
                       data_dir="bundled")
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"\(4, 2\)"):
        vec.step({"location": np.zeros((3, 2), np.float32), "label": np.zeros(4, np.int64)})
    with pytest.raises(RuntimeError, match="reset"):
        gym.make_vec("glimpse/MNIST-v1", num_envs=2, vectorization_mode="vector_entry_point").step(None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the engine runs on it (tests/test_canvas.py)")
def test_a_gpu_that_is_not_there_is_named():
    for make in (lambda: gym.make("glimpse/ClutteredMNIST60-v1", device="cuda"),
                 lambda: gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=4,
                                      vectorization_mode="vector_entry_point", device="cuda")):
        with pytest.raises(ValueError, match="device='cuda': no CUDA GPU is available"):
            make()


def test_step_after_end_or_before_reset():
    env = make("glimpse/MNIST-v1").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"location": np.zeros(2, np.float32), "label": 0})
    env.reset(seed=0)
    for _ in range(6):
        env.step({"location": np.zeros(2, np.float32), "label": 0})
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"location": np.zeros(2, np.float32), "label": 0})


@pytest.mark.parametrize("kwargs,match", [
    (dict(glimpse_size=80), "larger than the canvas"),
    (dict(n_clutter=-1), "n_clutter"),
    (dict(canvas_size=20), "canvas_size"),
    (dict(n_scales=0), "n_scales"),
    (dict(split="holdout"), "split"),
    (dict(first_location="corner"), "first_location"),
    (dict(n_digits=0), "n_digits"),
    (dict(n_digits=5), "at most 4"),
    (dict(n_digits=2, centred_digit=True), "centred"),
    (dict(centred_digit="False"), "centred_digit must be True or False, got 'False'"),  # as a config file gives it
])
def test_impossible_sizes_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GlimpseTask(**kwargs)
    with pytest.raises(ValueError, match=match):
        gym.make("glimpse/ClutteredMNIST60-v1", **kwargs)


def test_unknown_id_is_named():
    with pytest.raises(gym.error.Error, match="ClutteredMNIST61"):
        gym.make("glimpse/ClutteredMNIST61-v1")


def test_bad_reset_options():
    env = make("glimpse/ClutteredMNIST60-v1")
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"colour": 1})
    with pytest.raises(ValueError, match="uint8"):
        env.reset(options={"canvas": np.zeros((28, 28), np.uint8), "label": 1})
    for label in (None, "3"):
        with pytest.raises(ValueError, match="labels must be an array of numbers"):
            env.reset(options={"canvas": np.zeros((60, 60), np.uint8), "label": label})


@pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")
def test_what_the_spaces_hold_and_numpy_numbers_are_taken():
    """An action inside action_space steps (integer coordinates too); numpy integers and booleans, as a
    sweep over np.arange gives them, are the numbers they mean."""
    env = make("glimpse/ClutteredMNIST60-v1", canvas_size=np.int64(60), centred_digit=np.bool_(False))
    task = env.unwrapped.task
    assert type(task.canvas_size) is int and type(task.centred_digit) is bool
    env.reset(seed=0)
    action = {"location": [0, 0], "label": 3}
    assert env.action_space.contains(action)
    observation = env.step(action)[0]
    np.testing.assert_array_equal(observation["location"], np.zeros(2, np.float32))
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                       data_dir="bundled")
    torch.testing.assert_close(vec.reset(seed=np.int64(3))[0]["glimpse"], vec.reset(seed=3)[0]["glimpse"])


def test_an_edit_of_envs_tasks_in_a_process_does_not_change_what_an_id_makes(monkeypatch):
    monkeypatch.setitem(envs.TASKS["cluttered60"], "n_clutter", 0)
    assert make("glimpse/ClutteredMNIST60-v1").unwrapped.task.n_clutter == 4


def test_the_vector_env_keeps_no_autograd_graph_of_the_actions_even_unchecked():
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                       data_dir="bundled", validate=False).unwrapped
    vec.reset(seed=0)
    policy_output = torch.zeros(2, 2, requires_grad=True) * 1.0
    observation = vec.step({"location": policy_output, "label": torch.zeros(2, dtype=torch.int64)})[0]
    assert not observation["location"].requires_grad and not vec.engine.locations[-1].requires_grad


def test_render_draws_the_canvas_with_the_path():
    env = make("glimpse/ClutteredMNIST60-v1", render_mode="rgb_array")
    env.reset(seed=0)
    env.step({"location": np.array([0.5, 0.5], np.float32), "label": 0})
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    assert frame.shape[0] >= 60 and frame.shape[1] >= 60


def test_human_rendering_shows_the_rgb_frames_or_names_the_missing_package():
    """render_mode="human" goes through Gymnasium's HumanRendering over the env's rgb_array frames;
    without pygame the first reset names the package to install (docs/environments.md)."""
    import importlib.util

    with pytest.warns(UserWarning, match="HumanRendering wrapper is being applied"):
        env = make("glimpse/ClutteredMNIST60-v1", render_mode="human")
    assert isinstance(env, gym.wrappers.HumanRendering) and env.unwrapped.render_mode == "rgb_array"
    if importlib.util.find_spec("pygame") is None:
        with pytest.raises(gym.error.DependencyNotInstalled, match="pip install"):
            env.reset(seed=0)
    env.close()


TWO_DIGITS = "glimpse/ClutteredTwoDigitMNIST100-v1"


def finish(env, label, steps):
    for _ in range(steps - 1):
        env.step({"location": np.zeros(2, np.float32), "label": label})
    return env.step({"location": np.zeros(2, np.float32), "label": label})


def test_two_digit_env_rewards_the_whole_sequence_in_reading_order():
    env = make(TWO_DIGITS).unwrapped
    for seed in range(100):  # a canvas with two different digits, so that their order matters
        env.reset(seed=seed)
        if len(set(env._episodes.labels[0].tolist())) == 2:
            break
    truth, where = env._episodes.labels[0].numpy().copy(), env._episodes.digit_xy[0].numpy()
    assert where[0, 0] <= where[1, 0]  # left digit first
    _, reward, terminated, _, info = finish(env, truth, 16)
    assert terminated and reward == 1.0
    np.testing.assert_array_equal(info["label"], truth)
    assert info["digit_xy"].shape == (2, 2)
    for wrong in (truth[::-1], np.array([truth[0], (truth[1] + 1) % 10])):  # order matters, and every digit
        env.reset(seed=seed)
        assert finish(env, wrong, 16)[1] == 0.0


def test_two_digit_vector_env_matches_single_env(bundled):
    single = make(TWO_DIGITS).unwrapped
    single.reset(seed=3)
    canvas, truth = single._episodes.canvases[0].numpy(), single._episodes.labels[0].numpy()
    vec = TorchToNumpy(gym.make_vec(TWO_DIGITS, num_envs=2, vectorization_mode="vector_entry_point",
                                    data_dir="bundled"))
    labels = np.stack([truth, truth[::-1]])
    obs, _ = vec.reset(seed=0, options={"images": np.stack([canvas, canvas]), "labels": labels,
                                        "first_location": "centre"})
    single.reset(options={"canvas": canvas, "label": truth, "first_location": "centre"})
    np.testing.assert_array_equal(obs["glimpse"][0], single._last_observation["glimpse"])
    for _ in range(15):
        vec.step({"location": np.zeros((2, 2), np.float32), "label": labels})
    _, reward, terminated, _, info = vec.step({"location": np.zeros((2, 2), np.float32), "label": labels[[0, 0]]})
    assert terminated.all() and info["label"].shape == (2, 2)
    assert reward[0] == 1.0 and reward[1] == float((truth == truth[::-1]).all())
    vec.step({"location": np.zeros((2, 2), np.float32), "label": labels})  # the autoreset step reads no action
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        vec.step({"location": np.zeros((2, 2), np.float32), "label": np.zeros(2, np.int64)})


def test_two_digit_env_names_a_single_label():
    env = make(TWO_DIGITS).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\(2,\)"):
        env.step({"location": np.zeros(2, np.float32), "label": 3})
    assert env._episodes.t == 1


@pytest.mark.parametrize("options,match", [
    ({"first_location": {}}, "first_location must be 'random', 'centre' or an \\(x, y\\) pair in \\[-1, 1\\], got dict"),
    ({"first_location": [0.1, 0.2, 0.3]}, "got list \\[0.1, 0.2, 0.3\\]"),
    ({"index": 2.0}, "index must be an integer .* got float 2.0"),
    ({"index": True}, "index must be an integer .* got bool True"),
])
def test_reset_options_that_do_not_fit_say_what_was_expected(options, match):
    env = make("glimpse/ClutteredMNIST60-v1")
    with pytest.raises(ValueError, match=match):
        env.reset(seed=0, options=options)
    env.reset(seed=0, options={"first_location": None})  # None is the option's default, as in Gymnasium


def test_a_location_just_outside_the_square_is_named_to_its_last_digit():
    env = make("glimpse/ClutteredMNIST60-v1")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"up to 1\.00000011920928"):
        env.step({"location": np.array([-1.0000001, 0.0], np.float32), "label": 0})


@pytest.mark.parametrize("validate", [True, False])
def test_observations_and_the_path_keep_where_they_looked_when_the_action_buffer_is_reused(validate):
    """A rollout may refill one action buffer each step; what the env returned and records must not
    change with it."""
    env = make("glimpse/ClutteredMNIST60-v1")
    env.reset(seed=0)
    action, seen = {"location": np.zeros(2, np.float32), "label": np.int64(0)}, []
    for x in (0.1, 0.2, 0.3):
        action["location"][:] = x
        seen.append(env.step(action)[0]["location"])
    np.testing.assert_allclose([o[0] for o in seen], [0.1, 0.2, 0.3])
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                       data_dir="bundled", validate=validate).unwrapped
    vec.reset(seed=0)
    buffer, label, seen = torch.zeros(2, 2), torch.zeros(2, dtype=torch.int64), []
    for x in (0.1, 0.2, 0.3):
        buffer.fill_(x)
        seen.append(vec.step({"location": buffer, "label": label})[0]["location"])
    torch.testing.assert_close(torch.stack([o[0, 0] for o in seen]), torch.tensor([0.1, 0.2, 0.3]))
    torch.testing.assert_close(torch.stack([p[0, 0] for p in vec.engine.locations[1:]]), torch.tensor([0.1, 0.2, 0.3]))


def test_editing_an_observation_in_place_reaches_neither_the_path_nor_the_next_observation():
    """Gymnasium hands out fresh arrays: a wrapper that normalises in place must not redraw the
    path render shows, nor change the observation of another step (the final one repeats T-1's)."""
    env = make("glimpse/ClutteredMNIST60-v1")
    first, _ = env.reset(seed=0)
    first["location"][:] = 0.9
    action = {"location": np.full(2, 0.5, np.float32), "label": np.int64(0)}
    for _ in range(5):
        before_final, *_ = env.step(action)
    final, *_, terminated, _, _ = env.step(action)
    assert terminated and final["glimpse"] is not before_final["glimpse"]
    before_final["location"][:] = -1
    before_final["glimpse"][:] = 0
    np.testing.assert_array_equal(final["location"], [0.5, 0.5])
    assert final["glimpse"].any()
    path = env.unwrapped._episodes.path()[0].numpy()
    assert not np.isclose(path, 0.9).any() and not np.isclose(path, -1).any()
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                       data_dir="bundled").unwrapped
    obs, _ = vec.reset(seed=0, options={"first_location": np.array([0.3, 0.3], np.float32)})
    obs["location"][0] = 0.9  # a (2,) first location is broadcast: one write must not reach both rows
    actions = {"location": torch.full((2, 2), 0.5), "label": torch.zeros(2, dtype=torch.int64)}
    for _ in range(5):
        before_final, *_ = vec.step(actions)
    final, *_ = vec.step(actions)
    before_final["location"].fill_(-1)
    torch.testing.assert_close(final["location"], torch.full((2, 2), 0.5))
    path = vec.engine.path()
    assert not torch.isclose(path, torch.tensor(0.9)).any() and not torch.isclose(path, torch.tensor(-1.0)).any()


def test_the_autoreset_step_ignores_its_actions_as_documented():
    vec = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                       data_dir="bundled").unwrapped
    vec.reset(seed=0)
    actions = {"location": torch.zeros(2, 2), "label": torch.zeros(2, dtype=torch.int64)}
    for _ in range(6):
        *_, terminated, _, _ = vec.step(actions)
    assert terminated.all()
    nonsense = {"location": torch.full((2, 2), float("nan")), "label": torch.full((2,), 42)}
    obs, reward, terminated, _, _ = vec.step(nonsense)  # NEXT_STEP: only starts new episodes
    assert not terminated.any() and (reward == 0).all() and vec.engine.t == 1


@pytest.mark.parametrize("vector", [False, True])
def test_given_canvases_need_their_labels_and_a_seed_is_one_integer(vector):
    if vector:
        env = gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=2, vectorization_mode="vector_entry_point",
                           data_dir="bundled").unwrapped
        canvases = {"images": np.zeros((2, 60, 60), np.uint8)}
        with pytest.raises(ValueError, match="seed must be one integer, which seeds all 2 episodes"):
            env.reset(seed=[1, 2])
        with pytest.raises(ValueError, match="'reset_mask' does not apply"):
            env.reset(options={"reset_mask": np.ones(2, bool)})
    else:
        env, canvases = make("glimpse/ClutteredMNIST60-v1"), {"canvas": np.zeros((60, 60), np.uint8)}
    with pytest.raises(ValueError, match="needs its 'labels?'"):
        env.reset(seed=0, options=canvases)


def test_a_reset_that_fails_changes_nothing():
    """A bad option, even with a seed, leaves the generators as they were: the next reset draws
    what it would have drawn had the bad one never been made."""
    plain, tried = make("glimpse/ClutteredMNIST60-v1"), make("glimpse/ClutteredMNIST60-v1")
    for env in (plain, tried):
        env.reset(seed=0)
    for bad in ({"colour": 1}, {"index": -1}):
        with pytest.raises(ValueError):
            tried.reset(seed=5, options=bad)
    np.testing.assert_array_equal(tried.reset()[0]["glimpse"], plain.reset()[0]["glimpse"])

    def vec():
        return gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=3, vectorization_mode="vector_entry_point",
                            data_dir="bundled").unwrapped
    plain, tried = vec(), vec()
    for env in (plain, tried):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="unknown reset options"):
        tried.reset(seed=5, options={"colour": 1})
    torch.testing.assert_close(tried.reset()[0]["glimpse"], plain.reset()[0]["glimpse"])


@pytest.mark.parametrize("vector", [False, True])
def test_a_reset_without_a_seed_starts_a_new_episode_and_the_seed_repeats_them(vector):
    """Gymnasium's convention: reset(seed=s) seeds the env once; each later reset() draws anew from it."""
    env = (gym.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=3, vectorization_mode="vector_entry_point",
                        data_dir="bundled") if vector else make("glimpse/ClutteredMNIST60-v1"))

    def episodes():
        canvases = []
        for seed in (0, None, None):
            env.reset(seed=seed)
            engine = env.unwrapped.engine if vector else env.unwrapped._episodes
            canvases.append(engine.canvases.numpy().copy())
        return canvases

    first = episodes()
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    for a, b in zip(first, episodes()):
        np.testing.assert_array_equal(a, b)
