"""--reinforce-samples K: K trajectories per image on one canvas, with a leave-one-out baseline
(Kool et al. 2019). What the estimator is, what it trains, and that it learns."""
import numpy as np
import pytest
import torch

from glimpse.commands import train
from envs.data import load_bundled_subset
from glimpse.checkpoint import load_checkpoint
from glimpse.losses import hybrid_loss, leave_one_out_baseline
from glimpse.training.config import resolve_config
from glimpse.training.loop import make_learner

K = 4


def test_leave_one_out_baseline_is_the_mean_of_the_other_samples():
    reward = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    torch.testing.assert_close(leave_one_out_baseline(reward, 4),
                               torch.tensor([1 / 3, 2 / 3, 2 / 3, 1 / 3, 1.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="at least 2 samples"):
        leave_one_out_baseline(reward, 1)


@pytest.fixture(scope="module")
def learner():
    config = resolve_config({"preset": "mnist28", "batch_size": 8, "reinforce_samples": K, "data_dir": "bundled"})
    torch.manual_seed(0)
    return make_learner(config, load_bundled_subset())


def test_each_image_is_played_k_times_on_one_canvas(learner):
    assert learner.env.num_envs == 8 * K
    learner.loss(np.arange(8), step_seed=3)
    engine = learner.env.unwrapped.engine
    canvases, labels, path = (t.numpy() for t in (engine.canvases, engine.labels, engine.path()))  # (8K, H, W), (8K,), (8K, T, 2)
    for image in range(8):
        group = slice(image * K, (image + 1) * K)
        assert (canvases[group] == canvases[group][:1]).all() and (labels[group] == labels[group][0]).all()
        assert np.allclose(path[group, 0], path[group][0, 0])  # the same first glimpse
        assert len({tuple(p) for p in path[group, 1].round(6)}) == K  # then each samples its own
    assert not (canvases[:K] == canvases[K:2 * K]).all()


@pytest.mark.parametrize("core", ["rnn", "lstm"])
def test_the_shared_first_read_equals_reading_every_trajectory(core):
    """K trajectories of a canvas share its first glimpse: reading it once (``samples=K``) must
    give what reading it K times gives, forward and backward, under the same location noise."""
    from glimpse.models.ram import RAMConfig, RecurrentAttentionModel
    from glimpse.models.episodes import episode_env, run_episodes

    torch.manual_seed(0)
    model = RecurrentAttentionModel(RAMConfig(core=core, reinforce_into_core=0.1))
    task = dict(canvas_size=60, n_clutter=4, glimpse_size=12, n_scales=3, n_glimpses=4)
    generator = torch.Generator().manual_seed(5)
    images = torch.randint(0, 256, (3, 60, 60), dtype=torch.uint8, generator=generator)
    first = torch.rand(3, 2, generator=generator) * 2 - 1
    options = {"images": images.repeat_interleave(K, 0), "labels": torch.arange(3).repeat_interleave(K),
               "first_location": first.repeat_interleave(K, 0)}
    noise = torch.randn(3 * K, 3, 2, generator=generator)
    results = []
    for samples in (1, K):
        steps = iter(noise.unbind(1))
        rollout = run_episodes(model, episode_env(task, 3 * K, validate=False), sample=True, options=options,
                               noise=lambda mean: next(steps), samples=samples)
        parts = hybrid_loss(rollout.logits, rollout.labels, rollout.reward, rollout.log_probs, rollout.baselines,
                            samples=K)
        model.zero_grad()
        parts.total.backward()
        results.append((rollout, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (every, every_grads), (shared, shared_grads) = results
    for name in ("logits", "log_probs", "baselines", "locations"):
        torch.testing.assert_close(getattr(shared, name), getattr(every, name), msg=name)
    assert len({tuple(row) for row in shared.locations[:K, 1].tolist()}) == K  # the trajectories do part
    for name, grad in every_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, msg=name)
    with pytest.raises(ValueError, match="cannot hold 5 trajectories"):
        run_episodes(model, episode_env(task, 3 * K, validate=False), sample=True, options=options,
                     noise=lambda mean: torch.zeros_like(mean), samples=5)


def test_the_advantage_ignores_the_learned_baseline_and_routes_as_reinforce_should(learner, monkeypatch):
    model = learner.model
    torch.manual_seed(1)
    logits = torch.randn(8 * K, 10, requires_grad=True)
    labels = torch.randint(0, 10, (8 * K,))
    reward = torch.tensor([1.0, 0.0, 1.0, 0.0] * 8 * (K // 4))
    log_probs = torch.randn(8 * K, 5, requires_grad=True)
    baselines = torch.rand(8 * K, 5, requires_grad=True)
    loss = hybrid_loss(logits, labels, reward, log_probs, baselines, samples=K)
    other = hybrid_loss(logits, labels, reward, log_probs, torch.rand(8 * K, 5), samples=K)
    assert torch.equal(loss.reinforce, other.reinforce), "the learned baseline must not enter the advantage"
    expected = reward - leave_one_out_baseline(reward, K)
    torch.testing.assert_close(loss.advantage, expected[:, None].expand(-1, 5))
    grads = torch.autograd.grad(loss.reinforce, [log_probs, baselines, logits], allow_unused=True)
    assert grads[0].abs().sum() > 0 and grads[1] is None and grads[2] is None
    # the learned baseline still learns, from its own squared error only
    assert torch.autograd.grad(loss.baseline, baselines)[0].abs().sum() > 0

    # the trainer itself uses leave-one-out: moving the learned baseline leaves its REINFORCE term as it was
    _, before = learner.loss(np.arange(8), step_seed=5)
    kept = {name: p.detach().clone() for name, p in model.baseline.named_parameters()}
    with torch.no_grad():
        for p in model.baseline.parameters():
            p.add_(0.5)
    _, moved = learner.loss(np.arange(8), step_seed=5)
    with torch.no_grad():
        for name, p in model.baseline.named_parameters():
            p.copy_(kept[name])
    assert float(moved["losses/reinforce"]) == float(before["losses/reinforce"])
    assert float(moved["losses/baseline"]) != float(before["losses/baseline"])  # the shift did reach the baseline

    # through the real model: REINFORCE reaches the location network, never the baseline or classifier
    import glimpse.training.hard as hard
    played = []
    monkeypatch.setattr(hard, "hybrid_loss", lambda *a, **k: played.append((a, k)) or hybrid_loss(*a, **k))
    learner.loss(np.arange(8), step_seed=5)
    [((logits, labels, _, log_probs, baselines), options)] = played
    # the model's own graph; a reward that differs within each image's K trajectories, so the advantage is not 0
    parts = hybrid_loss(logits, labels, reward, log_probs, baselines, **options)
    assert parts.advantage.abs().sum() > 0

    def gradient_size(loss, module):
        model.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)
        return sum(float(p.grad.abs().sum()) for p in module.parameters() if p.grad is not None)

    assert gradient_size(parts.reinforce, model.location_policy) > 0
    assert gradient_size(parts.reinforce, model.classifier) == 0 and gradient_size(parts.reinforce, model.baseline) == 0
    assert gradient_size(parts.baseline, model.baseline) > 0  # the baseline learns from its squared error only
    assert gradient_size(parts.baseline, model.location_policy) == 0


def test_learns_well_above_chance_with_k_samples(tmp_path):
    argv = ["--preset", "mnist28", "--data-dir", "bundled", "--threads", "1", "--eval-batch-size", "1000",
            "--image-every", "0", "--epochs", "3", "--lr", "3e-3", "--batch-size", "32", "--reinforce-samples", "2",
            "--run-dir", str(tmp_path), "--run-name", "loo"]
    assert train.main(argv) == 0
    best = load_checkpoint(tmp_path / "loo" / "best.pt")
    assert best["train_config"]["reinforce_samples"] == 2
    assert best["test_accuracy"] > 0.5, best["test_accuracy"]  # chance is 0.1


def test_the_estimator_script_compares_baselines_at_equal_wall_clock(capsys):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("reinforce_estimators", root / "scripts" / "reinforce_estimators.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    ram = str(root / "checkpoints" / "ram-mnist28.pt")
    assert script.main(["--checkpoint", ram, "--samples", "1,2", "--batches", "3", "--batch-size", "8",
                        "--data-dir", "bundled"]) == 0
    out = capsys.readouterr().out
    assert "| learned baseline" in out and "| leave-one-out, K = 2" in out and "| 1.00 " in out
    assert script.main(["--checkpoint", ram, "--samples", "1", "--batches", "2", "--batch-size", "4", "--seed", "0",
                        "--data-dir", "bundled"]) == 0  # its warm-up minibatch is one of the seeds' own
    assert script.main(["--checkpoint", str(root / "checkpoints" / "sat-cluttered60.pt"), "--data-dir", "bundled"]) == 2
    assert "need hard attention" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:  # argparse: exit code 2, one line
        script.main(["--checkpoint", ram, "--samples", "0"])
    assert exit.value.code == 2 and "expected positive integers" in capsys.readouterr().err
