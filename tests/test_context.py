"""RAM's context network (Ba et al. 2015's DRAM): the env's coarse view of the whole canvas sets
the core's first state (--context-size)."""
import gymnasium as gym
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from envs import ClutteredMNISTVectorEnv
from envs.engine import coarse_view
from glimpse.checkpoint import load_checkpoint
from glimpse.commands import evaluate, train
from glimpse.models import get_family
from glimpse.models.ram import RAMConfig, RecurrentAttentionModel
from glimpse.models.episodes import run_episodes

TASK = dict(canvas_size=60, n_clutter=4, glimpse_size=12, n_scales=3, n_glimpses=4, data_dir="bundled")


def test_the_coarse_view_averages_each_cell_of_the_canvas():
    canvases = torch.randint(0, 256, (3, 60, 60), dtype=torch.uint8)
    view = coarse_view(canvases, 15)
    assert view.shape == (3, 15, 15) and view.dtype == torch.float32
    cells = canvases.to(torch.float64).view(3, 15, 4, 15, 4).mean((2, 4)) / 255
    torch.testing.assert_close(view.to(torch.float64), cells, rtol=0, atol=1e-6)
    assert coarse_view(canvases, 7).shape == (3, 7, 7)  # cells of unequal sides where 7 does not divide 60


def test_every_observation_carries_the_episode_s_context_view():
    env = ClutteredMNISTVectorEnv(4, context_size=15, **TASK)
    assert env.single_observation_space["context"].shape == (15, 15)
    observation, _ = env.reset(seed=0)
    view = observation["context"]
    torch.testing.assert_close(view, coarse_view(env.engine.canvases, 15))
    step = env.step({"location": torch.zeros(4, 2), "label": torch.zeros(4, dtype=torch.int64)})[0]
    assert torch.equal(step["context"], view) and step["context"] is not view  # the same view, a fresh copy
    assert "context" not in ClutteredMNISTVectorEnv(4, **TASK).reset(seed=0)[0]  # none unless asked for
    single = gym.make("glimpse/ClutteredMNIST60-v1", context_size=15, data_dir="bundled")
    check_env(single.unwrapped, skip_render_check=True)
    assert single.reset(seed=0)[0]["context"].shape == (15, 15)
    with pytest.raises(ValueError, match="context_size 61 is larger than the canvas"):
        ClutteredMNISTVectorEnv(1, context_size=61, **TASK)
    with pytest.raises(ValueError, match="context_size must be an integer >= 0"):
        ClutteredMNISTVectorEnv(1, context_size=-1, **TASK)


@pytest.mark.parametrize("core", ["rnn", "lstm"])
def test_a_new_context_network_starts_at_rest_and_learns_from_both_losses(core):
    """Its last layer starts at zero: with the other weights of a model without context, the model
    reads exactly as that one did; then classification and REINFORCE both reach it."""
    torch.manual_seed(0)
    plain = RecurrentAttentionModel(RAMConfig(n_glimpses=4, core=core))
    with_context = RecurrentAttentionModel(RAMConfig(n_glimpses=4, core=core, context_size=15))
    missing = with_context.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(name.startswith("context_network.") for name in missing)
    env = ClutteredMNISTVectorEnv(8, context_size=15, **TASK)
    ours = run_episodes(with_context, env, sample=False, seed=3)
    theirs = run_episodes(plain, env, sample=False, seed=3)
    torch.testing.assert_close(ours.logits, theirs.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours.locations, theirs.locations, rtol=0, atol=1e-6)
    for loss in ("classification", "reinforce"):
        with_context.zero_grad(set_to_none=True)
        sampled = run_episodes(with_context, env, sample=True, seed=3, samples=2,
                               generator=torch.Generator().manual_seed(0))
        (sampled.logits.logsumexp(-1).sum() if loss == "classification" else sampled.log_probs.sum()).backward()
        assert with_context.context_network.to_state.weight.grad.abs().sum() > 0, loss


def test_the_context_view_must_come_with_a_context_model_and_only_with_one():
    model = RecurrentAttentionModel(RAMConfig(n_glimpses=4, context_size=15))
    with pytest.raises(ValueError, match="make the env with context_size=15"):
        run_episodes(model, ClutteredMNISTVectorEnv(2, **TASK), sample=False, seed=0)
    glimpse, location = torch.zeros(2, 3, 12, 12), torch.zeros(2, 2)
    with pytest.raises(ValueError, match="context must be"):
        model(glimpse, location, (), context=torch.zeros(2, 14, 14))
    with pytest.raises(ValueError, match="context network only"):
        RecurrentAttentionModel(RAMConfig(n_glimpses=4))(glimpse, location, (), context=torch.zeros(2, 15, 15))


def test_pixels_read_count_the_context_view():
    family = get_family("ram")
    task = {k: v for k, v in TASK.items() if k != "data_dir"}
    plain = family.pixels_read(task, RAMConfig(n_glimpses=4).to_dict())
    seen = family.pixels_read({**task, "context_size": 15}, RAMConfig(n_glimpses=4, context_size=15).to_dict())
    assert seen["sensor_values"] == plain["sensor_values"] + 15 * 15
    assert seen["canvas_pixels_touched"] == plain["canvas_pixels_touched"] + 60 * 60


def test_train_starts_a_context_model_from_one_without_and_evaluate_reads_it(tmp_path, capsys):
    common = ["--data-dir", "bundled", "--threads", "1", "--image-every", "0", "--preset", "cluttered60",
              "--n-glimpses", "3", "--batch-size", "32", "--max-steps", "2", "--val-every", "2",
              "--run-dir", str(tmp_path)]
    assert train.main([*common, "--run-name", "plain"]) == 0
    source = load_checkpoint(tmp_path / "plain" / "best.pt")["model_state"]
    for name in ("context", "context-again"):  # the added network starts from the run's seed: the same twice
        assert train.main([*common, "--run-name", name, "--context-size", "20", "--max-steps", "1",
                           "--init-from", str(tmp_path / "plain" / "best.pt")]) == 0
    started = load_checkpoint(tmp_path / "context" / "last.pt")
    again = load_checkpoint(tmp_path / "context-again" / "last.pt")["model_state"]
    assert all(torch.equal(again[k], v) for k, v in started["model_state"].items())
    assert started["task"]["context_size"] == 20 and started["model_config"]["context_size"] == 20
    assert "context_size" not in load_checkpoint(tmp_path / "plain" / "best.pt")["task"]
    # one warm-up Adam step moves a weight by about its learning rate: the shared weights came from the source
    assert max(float((started["model_state"][k] - v).abs().max()) for k, v in source.items()) < 1e-4
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(tmp_path / "context" / "best.pt"), "--data-dir", "bundled",
                          "--limit", "64"]) == 0
    assert "accuracy" in capsys.readouterr().out
    for bad, message in ((["--context-size", "-2"], "--context-size must be an integer >= 0"),
                         (["--context-size", "80"], "--context-size 80 is larger than the canvas"),
                         (["--mode", "soft", "--context-size", "20"], "does not use --context-size")):
        assert train.main([*common, "--run-name", "bad", *bad]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
