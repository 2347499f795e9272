"""train.py and evaluate.py end to end on the bundled subset: learning, seeds, resume, errors."""
import argparse
import json
import math
import os
import signal

import numpy as np
import pytest
import torch

from glimpse.commands import evaluate
from glimpse.commands import train
from glimpse.training import loop
from glimpse.training.config import recipe_command, staged_recipe_command
from glimpse.checkpoint import load_checkpoint
from glimpse.evaluation import evaluate_checkpoint
from glimpse.cpu import flushes_denormals

FAST = ["--data-dir", "bundled", "--threads", "1", "--device", "cpu", "--eval-batch-size", "1000", "--image-every", "0"]


def run_train(tmp_path, name, *extra):
    code = train.main([*FAST, "--run-dir", str(tmp_path), "--run-name", name, *extra])
    return code, tmp_path / name


def weights(path):
    return load_checkpoint(path)["model_state"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


def test_hard_attention_learns_well_above_chance(tmp_path, capsys):
    code, run = run_train(tmp_path, "learn", "--preset", "mnist28", "--epochs", "6", "--lr", "3e-3",
                          "--batch-size", "64")
    assert code == 0
    captured = capsys.readouterr()
    assert "test accuracy" in captured.out and "TensorBoard logs" in captured.out
    best = load_checkpoint(run / "best.pt")
    assert best["test_accuracy"] > 0.6, best["test_accuracy"]  # chance is 0.1
    # off a terminal, progress comes as lines; the last one shows the run's best validation accuracy
    last_line = [line for line in captured.err.splitlines() if line.startswith("train:")][-1]
    assert f"best_val={best['best_val_accuracy']:.4f}" in last_line
    assert "bundled" in best["data_source"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run))
    events.Reload()
    val = [e.value for e in events.Scalars("val/accuracy")]
    assert len(val) == 6 and max(val) == pytest.approx(best["best_val_accuracy"])
    found = [e.value for e in events.Scalars("val/digit_found")]  # did it look at the digit?
    assert len(found) == 6 and all(0 <= f <= 1 for f in found)
    assert len(events.Scalars("val/distance_to_digit")) == 6


def test_the_removed_train_shift_loads_at_its_old_default_and_is_refused_otherwise(capsys):
    """--train-shift was a pilot that made things worse (docs/notebook/lab-notes.md): a run saved with
    it at 0 still loads; one that shifted is refused by name; the flag is gone."""
    from glimpse.training.config import TrainConfig

    saved = TrainConfig(preset="mnist28").to_dict()
    assert TrainConfig.from_dict({**saved, "train_shift": 0}) == TrainConfig.from_dict(saved)
    with pytest.raises(ValueError, match="train_shift=2: an option this version no longer has"):
        TrainConfig.from_dict({**saved, "train_shift": 2})
    with pytest.raises(SystemExit):
        train.main(["--train-shift", "2"])
    assert "unrecognized arguments: --train-shift" in capsys.readouterr().err


def test_init_from_starts_a_two_digit_reader_from_a_one_digit_run(tmp_path):
    args = ["--preset", "cluttered60", "--batch-size", "32", "--val-every", "2", "--max-steps", "2"]
    assert run_train(tmp_path, "one", *args, "--seed", "1")[0] == 0  # other initial weights than seed 0's
    source = weights(tmp_path / "one" / "best.pt")
    two = [*args, "--n-digits", "2", "--max-steps", "1", "--val-every", "1"]
    assert run_train(tmp_path, "two", *two, "--init-from", str(tmp_path / "one" / "best.pt"))[0] == 0
    assert run_train(tmp_path, "scratch", *two)[0] == 0
    started = load_checkpoint(tmp_path / "two" / "last.pt")
    assert started["train_config"]["init_from"] == str(tmp_path / "one" / "best.pt")
    assert started["task"]["n_digits"] == 2 and started["step"] == 1
    # one Adam step in the warm-up moves a weight by about its learning rate: the run began at the source's weights
    moved = max(float((v - source[k]).abs().max()) for k, v in started["model_state"].items())
    assert moved < 1e-4, moved
    scratch = weights(tmp_path / "scratch" / "last.pt")
    assert max(float((v - source[k]).abs().max()) for k, v in scratch.items()) > 0.01
    # the checkpoint carries the runs it started from, so a staged model keeps every command that rebuilds it
    one = load_checkpoint(tmp_path / "one" / "best.pt")
    assert "earlier_stages" not in one and "earlier_stages" not in load_checkpoint(tmp_path / "scratch" / "best.pt")
    assert started["earlier_stages"] == [{"train_config": one["train_config"], "train_seconds": one["train_seconds"]}]
    assert run_train(tmp_path, "three", *two, "--init-from", str(tmp_path / "two" / "best.pt"), "--lr", "0.0005")[0] == 0
    three = load_checkpoint(tmp_path / "three" / "best.pt")
    assert [stage["train_config"]["run_name"] for stage in three["earlier_stages"]] == ["one", "two"]
    line = staged_recipe_command([*three["earlier_stages"], {"train_config": three["train_config"]}])
    first, second, third = line.split(" && ")
    assert first.endswith("--seed 1 --run-name one") and "--init-from" not in first
    assert second.endswith("--init-from runs/one/best.pt --run-name two")
    assert "--lr 0.0005" in third and third.endswith("--init-from runs/two/best.pt")


def test_seeded_runs_reproduce(tmp_path):
    args = ["--preset", "cluttered60", "--max-steps", "6", "--batch-size", "32", "--val-every", "3"]
    assert not flushes_denormals()
    assert run_train(tmp_path, "a", *args)[0] == 0
    assert flushes_denormals() or not torch.set_flush_denormal(True)  # the run flushed them (where the CPU can)
    assert run_train(tmp_path, "b", *args)[0] == 0
    assert_same_weights(weights(tmp_path / "a" / "last.pt"), weights(tmp_path / "b" / "last.pt"))
    assert run_train(tmp_path, "c", *args, "--seed", "1")[0] == 0
    different = weights(tmp_path / "c" / "last.pt")
    assert any(not torch.equal(v, different[k]) for k, v in weights(tmp_path / "a" / "last.pt").items())


def test_a_backprop_family_resumes_exactly_too(tmp_path, interrupt_at_step):
    """DRAW's soft learner draws its minibatch's randomness from (seed, step) as REINFORCE's does."""
    args = ["--mode", "soft", "--arch", "draw", "--preset", "cluttered60", "--max-steps", "8", "--batch-size", "16",
            "--checkpoint-every", "4", "--val-every", "100", "--log-every", "100"]
    assert run_train(tmp_path, "whole", *args)[0] == 0
    interrupt_at_step(6)
    code, run = run_train(tmp_path, "cut", *args)
    assert code == 130 and load_checkpoint(run / "last.pt")["step"] == 4
    interrupt_at_step(None)
    assert train.main(["--resume", str(run)]) == 0
    assert_same_weights(weights(tmp_path / "whole" / "last.pt"), weights(run / "last.pt"))


@pytest.mark.parametrize("signum,when,stopped_at", [
    (signal.SIGTERM, "in the step", 6), (signal.SIGINT, "in the step", 6),
    (signal.SIGTERM, "in the callbacks", 6),  # after step 5's callbacks took their answer: it waits for step 6
    (signal.SIGTERM, "twice", 4),  # the second stops it at once: the last periodic checkpoint stands
])
def test_a_signal_stops_the_run_after_its_step_with_that_step_s_checkpoint(tmp_path, monkeypatch, capsys, signum,
                                                                            when, stopped_at):
    """kill (SIGTERM, a scheduler's preemption) or Ctrl-C (SIGINT) mid-run: the step under way ends,
    last.pt is written at it (no step lost, though it is no --checkpoint-every step), the run stops as
    interrupted, and resumed it ends with the weights of a run never stopped. The handlers are put back."""
    from glimpse.training import callbacks

    args = ["--mode", "soft", "--arch", "draw", "--preset", "cluttered60", "--max-steps", "8", "--batch-size", "16",
            "--checkpoint-every", "4", "--val-every", "100", "--log-every", "1"]
    assert run_train(tmp_path, "whole", *args)[0] == 0
    before = signal.getsignal(signum)
    real_indices, real_log = loop.batch_indices, callbacks.ScalarLog.after_step

    def signalled_step(seed, step, *rest):
        if step == 5:  # delivered in the step: the run stops after it
            os.kill(os.getpid(), signum)
            if when == "twice":
                os.kill(os.getpid(), signum)
        return real_indices(seed, step, *rest)

    def signalled_log(self, run, done, result):
        real_log(self, run, done, result)
        if done == 5:
            os.kill(os.getpid(), signum)
    if when == "in the callbacks":
        monkeypatch.setattr(callbacks.ScalarLog, "after_step", signalled_log)
    else:
        monkeypatch.setattr(loop, "batch_indices", signalled_step)
    code, run = run_train(tmp_path, "cut", *args)
    assert code == 130 and load_checkpoint(run / "last.pt")["step"] == stopped_at
    err = capsys.readouterr().err
    assert (f"{signal.Signals(signum).name}: stopped after step {stopped_at}, with its checkpoint" in err) == \
        (when != "twice")
    assert signal.getsignal(signum) == before
    monkeypatch.undo()
    assert train.main(["--resume", str(run)]) == 0
    assert_same_weights(weights(tmp_path / "whole" / "last.pt"), weights(run / "last.pt"))


def test_a_show_attend_tell_run_saved_with_the_dead_score_bias_resumes(tmp_path, interrupt_at_step, monkeypatch):
    """Show-Attend-Tell's attention score had a bias, which softmax ignores; it was dropped. A run saved
    with it resumes: its weights load without it, and Adam's state (by parameter position) is refitted."""
    from torch import nn
    from glimpse.models import attention_decoder
    from glimpse.models.registry import build_model

    def with_score_bias(self, feature_size, hidden_size, attention_size):  # the layout before the change
        nn.Module.__init__(self)
        self.feature_proj = nn.Linear(feature_size, attention_size)
        self.hidden_proj = nn.Linear(hidden_size, attention_size, bias=False)
        self.score = nn.Linear(attention_size, 1)

    args = ["--mode", "soft", "--arch", "sat", "--preset", "cluttered60", "--max-steps", "6", "--batch-size", "16",
            "--checkpoint-every", "3", "--val-every", "100", "--log-every", "100"]
    with monkeypatch.context() as old_code:
        old_code.setattr(attention_decoder.AdditiveAttention, "__init__", with_score_bias)
        assert run_train(tmp_path, "whole", *args)[0] == 0
        interrupt_at_step(5)
        code, run = run_train(tmp_path, "cut", *args)
        interrupt_at_step(None)
    assert code == 130 and "decoder.attention.score.bias" in weights(run / "last.pt")
    saved = load_checkpoint(run / "last.pt")
    model = build_model("sat", saved["model_config"])
    model.load_state_dict(saved["model_state"])  # the bias dropped on load
    with pytest.raises(ValueError):  # a plain load of the old optimiser state: one parameter too many
        loop.make_optimizer(model, 1e-3).load_state_dict(saved["optimizer_state"])
    assert train.main(["--resume", str(run)]) == 0
    resumed, whole = weights(run / "last.pt"), weights(tmp_path / "whole" / "last.pt")
    assert "decoder.attention.score.bias" not in resumed
    del whole["decoder.attention.score.bias"]  # moved by round-off gradients only; the output ignores it
    assert resumed.keys() == whole.keys()
    for key in whole:
        torch.testing.assert_close(resumed[key], whole[key], rtol=1e-4, atol=1e-5)


def test_a_show_attend_tell_checkpoint_saved_with_the_dead_score_bias_starts_a_run():
    """--init-from a checkpoint written before the score lost its bias: its weights fit (the bias is
    dropped on load, as softmax ignores it)."""
    from pathlib import Path

    from glimpse.training.config import resolve_config

    shipped = Path(__file__).resolve().parents[1] / "checkpoints" / "sat-cluttered100.pt"
    assert "decoder.attention.score.bias" in load_checkpoint(shipped)["model_state"]
    config = resolve_config({"preset": "cluttered100", "arch": "sat", "init_from": str(shipped)})
    weights, stages = loop.initial_weights(config)
    assert stages and "decoder.attention.score.weight" in weights


def test_resume_after_interruption_continues_exactly(tmp_path, interrupt_at_step):
    args = ["--preset", "cluttered60", "--max-steps", "12", "--batch-size", "32", "--checkpoint-every", "5",
            "--val-every", "6", "--log-every", "1"]  # step 11 is logged after the last checkpoint, then again
    assert run_train(tmp_path, "whole", *args)[0] == 0
    interrupt_at_step(11)
    code, run = run_train(tmp_path, "cut", *args)
    assert code == 130
    assert load_checkpoint(run / "last.pt")["step"] == 10  # at most the work since the checkpoint is lost
    assert [h["step"] for h in load_checkpoint(run / "last.pt")["history"]] == [6]
    interrupt_at_step(None)
    assert train.main(["--resume", str(run)]) == 0
    assert load_checkpoint(run / "last.pt")["step"] == 12
    assert_same_weights(weights(tmp_path / "whole" / "last.pt"), weights(run / "last.pt"))
    # the learning curve continues too: one entry per validation, the same accuracies
    whole, resumed = (load_checkpoint(r / "last.pt")["history"] for r in (tmp_path / "whole", run))
    assert [h["step"] for h in resumed] == [h["step"] for h in whole] == [6, 12]
    assert [h["val_accuracy"] for h in resumed] == [h["val_accuracy"] for h in whole]
    # and so do its TensorBoard curves: what was logged at the checkpoint's step is kept, once. Read
    # by the loader TensorBoard's web page uses without its Rust server, which purges only at a start
    # marker after the first
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator

    def logged_steps(run_dir, tag):
        events = EventAccumulator(str(run_dir))
        events.Reload()
        return [e.step for e in events.Tensors(tag)]
    for tag, steps in (("losses/total", list(range(1, 13))), ("val/accuracy", [6, 12])):
        assert logged_steps(run, tag) == logged_steps(tmp_path / "whole", tag) == steps
    # the settings table: at the start, and again where the run resumed
    assert logged_steps(run, "hyperparameters/text_summary") == [0, 11]


def test_resume_refuses_changed_settings(tmp_path, capsys):
    code, run = run_train(tmp_path, "r", "--preset", "mnist28", "--max-steps", "3", "--batch-size", "32")
    assert code == 0
    assert train.main(["--resume", str(run), "--lr", "0.1"]) == 2
    assert "--lr" in capsys.readouterr().err
    # where the data lives on this machine is no setting of the run
    assert train.main(["--resume", str(run), "--data-dir", "bundled", "--max-steps", "4"]) == 0
    # a setting restated with the run's own value changes nothing; another value is refused
    assert train.main(["--resume", str(run), "--seed", "0", "--preset", "mnist28", "--max-steps", "5"]) == 0
    capsys.readouterr()
    assert train.main(["--resume", str(run), "--seed", "1", "--max-steps", "6"]) == 2
    assert "cannot change --seed" in capsys.readouterr().err


def test_nan_loss_stops_with_a_message(tmp_path, monkeypatch, capsys):
    from glimpse.training import hard

    real = hard.HardAttentionLearner.loss

    def poisoned(self, indices, seed):
        loss, metrics = real(self, indices, seed)
        return loss * float("nan"), metrics

    monkeypatch.setattr(hard.HardAttentionLearner, "loss", poisoned)
    code, _ = run_train(tmp_path, "nan", "--preset", "mnist28", "--max-steps", "3", "--batch-size", "32")
    assert code == 1
    assert "became nan or inf" in capsys.readouterr().err


def test_annealed_location_std_follows_the_cosine_and_is_logged(tmp_path):
    code, run = run_train(tmp_path, "anneal", "--preset", "mnist28", "--max-steps", "6", "--batch-size", "32",
                          "--epochs", "1", "--log-every", "1", "--location-std", "0.3", "--location-std-final", "0.1")
    assert code == 0
    best = load_checkpoint(run / "best.pt")
    assert best["model_config"]["location_std"] == 0.1  # the std the policy ends with: what --samples draws with
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run))
    events.Reload()
    stds = [e.value for e in events.Scalars("train/location_std")]
    from envs.data import load_bundled_subset

    steps_per_epoch = len(load_bundled_subset().train) // 32
    expected = [0.1 + 0.2 * 0.5 * (1 + math.cos(math.pi * s / steps_per_epoch)) for s in range(6)]
    assert stds == pytest.approx(expected, rel=1e-6)  # 0.3 at step 0, decreasing toward 0.1
    # and the policy samples with it, not only the log: halfway down the cosine the std is 0.2
    from types import SimpleNamespace

    from glimpse.models import get_family

    family = get_family("ram")
    model = family.build(family.model_config(loop.TrainConfig()))
    family.schedule(model, SimpleNamespace(location_std=0.3, location_std_final=0.1), 0.5)
    size = model.config.glimpse_size
    out = model(torch.rand(2, model.config.n_scales, size, size), torch.zeros(2, 2), model.initial_state())
    assert torch.allclose(out.std, torch.full_like(out.std, 0.2))


def test_runs_saved_before_reinforce_into_core_still_resume_and_report():
    from glimpse.training.config import TrainConfig

    assert TrainConfig(detach_policy_input=True).reinforce_into_core == 0.0
    assert TrainConfig(detach_policy_input=False).reinforce_into_core == 1.0
    assert "detach_policy_input" not in TrainConfig().to_dict()


def test_help_states_each_default_once(capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    assert "(default: None)" not in text  # the parser's placeholder, not a real default
    assert "draw options: --read-size READ_SIZE side N of the N x N filterbank read (default: 12) --" in text
    assert "ram, dram, ram-diff options: --location-std LOCATION_STD" in text  # each family's options under it
    assert "(default: $GLIMPSE_DATA, ./data, download, bundled subset) --run-dir" in text


def test_existing_run_is_not_overwritten(tmp_path, capsys):
    args = ["--preset", "mnist28", "--max-steps", "2", "--batch-size", "32"]
    assert run_train(tmp_path, "same", *args)[0] == 0
    before = (tmp_path / "same" / "last.pt").read_bytes()
    assert run_train(tmp_path, "same", *args)[0] == 2
    assert "--resume" in capsys.readouterr().err
    assert (tmp_path / "same" / "last.pt").read_bytes() == before


@pytest.fixture(scope="module")
def hard_checkpoint(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpt")
    assert train.main([*FAST, "--run-dir", str(tmp), "--run-name", "e", "--preset", "cluttered60",
                       "--max-steps", "4", "--batch-size", "32"]) == 0
    return tmp / "e" / "best.pt"


def last_json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_evaluate_reports_the_training_test_accuracy(hard_checkpoint, capsys):
    assert not flushes_denormals()
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--data-dir", "bundled", "--json"]) == 0
    assert flushes_denormals() or not torch.set_flush_denormal(True)  # as training does (where the CPU can)
    result = last_json(capsys)
    assert result["n"] == 2000 and 0 <= result["accuracy"] <= 1
    assert result["error"] == pytest.approx(1 - result["accuracy"])
    low, high = result["error_interval"]  # Wilson's 95 % interval: about 2 points wide for 2,000 canvases
    assert low < result["error"] < high and 0.01 < high - low < 0.06
    assert result["accuracy"] == pytest.approx(load_checkpoint(hard_checkpoint)["test_accuracy"])
    assert "policy mean" in result["evaluation"]


def test_evaluate_fresh_canvases_and_the_first_n(hard_checkpoint, capsys):
    argv = ["--checkpoint", str(hard_checkpoint), "--data-dir", "bundled", "--json"]
    assert evaluate.main([*argv, "--limit", "50"]) == 0
    first = last_json(capsys)
    assert first["n"] == 50 and "seed 2" in first["images"]
    assert evaluate.main([*argv, "--canvas-seed", "77", "--limit", "50"]) == 0
    fresh = last_json(capsys)
    assert fresh["n"] == 50 and "seed 77" in fresh["images"] and "fresh canvases" in fresh["images"]


def test_evaluate_against_a_second_checkpoint_pairs_them_canvas_by_canvas(hard_checkpoint, tmp_path, capsys):
    """--against scores both on the same canvases and counts the canvases only one reads right."""
    assert train.main([*FAST, "--run-dir", str(tmp_path), "--run-name", "other", "--preset", "cluttered60",
                       "--max-steps", "6", "--batch-size", "32", "--seed", "3"]) == 0
    other = tmp_path / "other" / "best.pt"
    argv = ["--checkpoint", str(hard_checkpoint), "--against", str(other), "--data-dir", "bundled",
            "--limit", "300", "--json"]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    paired = json.loads(printed.strip().splitlines()[-1])
    assert "McNemar" in printed and "right" not in paired and "right" not in paired["against"]
    mine, theirs = (evaluate_checkpoint(path, data_dir="bundled", limit=300, per_canvas=True, progress=False)["right"]
                    for path in (hard_checkpoint, other))
    assert paired["n"] == paired["against"]["n"] == 300
    assert paired["against"]["only_this"] == int((mine & ~theirs).sum())
    assert paired["against"]["only_against"] == int((theirs & ~mine).sum())
    assert paired["accuracy"] == pytest.approx(mine.mean()) and paired["against"]["accuracy"] == pytest.approx(theirs.mean())
    assert 0 < paired["against"]["p"] <= 1
    assert evaluate.main([*argv[:3], str(hard_checkpoint), *argv[4:]]) == 0  # itself: nothing to tell apart
    itself = last_json(capsys)["against"]
    assert itself["only_this"] == itself["only_against"] == 0 and itself["p"] == 1


def test_evaluate_against_a_checkpoint_of_other_canvases_is_refused(hard_checkpoint, tmp_path, capsys):
    assert train.main([*FAST, "--run-dir", str(tmp_path), "--run-name", "small", "--preset", "mnist28",
                       "--max-steps", "2", "--batch-size", "32"]) == 0
    capsys.readouterr()
    code = evaluate.main(["--checkpoint", str(hard_checkpoint), "--against", str(tmp_path / "small" / "best.pt"),
                          "--data-dir", "bundled"])
    assert code == 2
    err = capsys.readouterr().err
    assert "other canvases" in err and "canvas_size=28" in err and "canvas_size=60" in err
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--against", str(tmp_path / "missing.pt"),
                          "--data-dir", "bundled"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_evaluate_against_refuses_before_it_scores_and_pairs_any_two_on_one_images_file(hard_checkpoint, tmp_path,
                                                                                        capsys, monkeypatch):
    """--samples with a deterministic --against is refused before either checkpoint is scored (10,000
    canvases times the trajectories would be thrown away); on one --images file two checkpoints of other
    clutter read the same canvases, so they pair."""
    from glimpse import evaluation

    assert train.main([*FAST, "--run-dir", str(tmp_path), "--run-name", "soft", "--preset", "translated60", "--mode",
                       "soft", "--arch", "stn", "--max-steps", "2", "--batch-size", "32"]) == 0
    soft = tmp_path / "soft" / "best.pt"
    real = evaluation.evaluate_checkpoint
    monkeypatch.setattr(evaluation, "evaluate_checkpoint", lambda *a, **k: pytest.fail("scored before refusing"))
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--against", str(soft), "--samples", "2",
                          "--data-dir", "bundled"]) == 2
    assert f"{soft} holds a stn model, which is deterministic" in capsys.readouterr().err
    monkeypatch.setattr(evaluation, "evaluate_checkpoint", real)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "canvases.npz", images=rng.integers(0, 256, (40, 60, 60), dtype=np.uint8),
             labels=rng.integers(0, 10, 40))
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--against", str(soft), "--images",
                          str(tmp_path / "canvases.npz"), "--json"]) == 0
    paired = last_json(capsys)
    assert paired["n"] == paired["against"]["n"] == 40 and 0 < paired["against"]["p"] <= 1


def test_an_empty_data_dir_stops_train_and_evaluate_before_anything_is_written(hard_checkpoint, tmp_path, capsys):
    """``--data-dir "$UNSET"`` must not fall back to other digits without a word."""
    argv = [a for a in FAST if a not in ("--data-dir", "bundled")]
    assert train.main([*argv, "--data-dir", "", "--run-dir", str(tmp_path / "runs")]) == 2
    assert "--data-dir is empty" in capsys.readouterr().err and not (tmp_path / "runs").exists()
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--data-dir", ""]) == 2
    assert "--data-dir is empty" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the comparison below runs instead")
def test_evaluate_refuses_cuda_without_a_gpu(hard_checkpoint, capsys):
    argv = ["--checkpoint", str(hard_checkpoint), "--data-dir", "bundled", "--limit", "10", "--device", "cuda"]
    assert evaluate.main(argv) == 2
    assert "no CUDA GPU is available" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_evaluate_on_a_gpu_scores_what_the_cpu_scores(hard_checkpoint, capsys):
    """--device moves the model only: the canvases and the sampled trajectories' noise are drawn on
    the CPU, so a GPU scores the same canvases, up to float rounding on a borderline few."""
    argv = ["--checkpoint", str(hard_checkpoint), "--data-dir", "bundled", "--json", "--limit", "500", "--samples", "2"]
    assert evaluate.main(argv) == 0
    cpu = last_json(capsys)
    assert cpu["device"] == "cpu"
    assert evaluate.main([*argv, "--device", "cuda"]) == 0
    cuda = last_json(capsys)
    assert cuda["device"].startswith("cuda") and abs(cuda["accuracy"] - cpu["accuracy"]) <= 2 / 500


def test_evaluate_npz_and_sampled_trajectories(hard_checkpoint, tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "x.npz"
    np.savez(path, images=rng.integers(0, 256, (10, 60, 60), dtype=np.uint8), labels=np.arange(10))
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--images", str(path), "--json"]) == 0
    result = last_json(capsys)
    assert result["n"] == 10 and result["benchmark"] is None  # a file's canvases are not the benchmark's
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--images", str(path), "--split", "val"]) == 2
    assert "--images brings its own" in capsys.readouterr().err
    assert evaluate.main(["--checkpoint", str(hard_checkpoint), "--images", str(path), "--json", "--samples", "3"]) == 0
    assert "averaged over 3 sampled trajectories" in last_json(capsys)["evaluation"]


def test_evaluate_errors_exit_2(hard_checkpoint, tmp_path, capsys):
    wrong_size = tmp_path / "small.npz"
    np.savez(wrong_size, images=np.zeros((3, 28, 28), np.uint8), labels=np.zeros(3, np.int64))
    no_labels = tmp_path / "nolabels.npz"
    np.savez(no_labels, images=np.zeros((3, 60, 60), np.uint8))
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"nope")
    floats = tmp_path / "floats.npz"
    np.savez(floats, images=np.zeros((3, 60, 60), np.float32), labels=np.zeros(3, np.int64))
    bad_labels = tmp_path / "labels.npz"
    np.savez(bad_labels, images=np.zeros((3, 60, 60), np.uint8), labels=np.array([0, 10, 3]))
    empty = tmp_path / "empty.npz"
    np.savez(empty, images=np.zeros((0, 60, 60), np.uint8), labels=np.zeros(0, np.int64))
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, images=np.array([object()], dtype=object), labels=np.zeros(1, np.int64))
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(hard_checkpoint.read_bytes()[:1000])
    with_objects = tmp_path / "objects.pt"  # unpickling it would run code: refused, and not advised
    torch.save({"config": argparse.Namespace(lr=0.1)}, with_objects)
    cases = [
        (["--checkpoint", str(hard_checkpoint), "--images", str(wrong_size)], "28x28"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(no_labels)], "'labels'"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(garbage)], "cannot read"),
        (["--checkpoint", str(corrupt)], "corrupt"),
        (["--checkpoint", str(with_objects)], "never unpickled"),
        (["--checkpoint", str(tmp_path / "missing.pt")], "does not exist"),
        (["--checkpoint", str(tmp_path)], "is a folder: give a checkpoint file in it"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(floats)], "uint8"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(bad_labels)], "0..9"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(empty)], "no images"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(pickled)], "cannot read"),
        (["--checkpoint", str(hard_checkpoint), "--images", str(tmp_path)], "cannot read"),
        (["--checkpoint", str(hard_checkpoint), "--samples", "-1"], "--samples"),
        (["--checkpoint", str(hard_checkpoint), "--batch-size", "0"], "--batch-size"),
        (["--checkpoint", str(hard_checkpoint), "--limit", "0"], "--limit"),
        (["--checkpoint", str(hard_checkpoint), "--threads", "0"], "--threads"),
        (["--checkpoint", str(hard_checkpoint), "--canvas-seed", "-3"], "--canvas-seed"),
        (["--checkpoint", str(hard_checkpoint), "--canvas-seed", "3", "--images", str(wrong_size)], "--canvas-seed"),
    ]
    for argv, match in cases:
        assert evaluate.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert match in err and "weights_only` set to `False`" not in err, err


def load_checkpoint_table():
    """scripts/checkpoint_table.py, the command line of glimpse/scores.py."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "checkpoint_table.py"
    spec = importlib.util.spec_from_file_location("checkpoint_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checkpoint_table_scores_each_checkpoint_both_ways(hard_checkpoint, tmp_path, capsys):
    """scripts/checkpoint_table.py (the README's results table): evaluate.py's deterministic error,
    RAM's error averaged over sampled trajectories, the target and the command that trained it."""
    import shutil

    table = load_checkpoint_table()
    shutil.copy(hard_checkpoint, tmp_path / "ram-cluttered60.pt")
    table.main(["--checkpoints", str(tmp_path), "--data-dir", "bundled", "--samples", "2"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| `ram-cluttered60.pt`")]
    assert len(rows) == 2, lines  # its row in the results table and in the commands; no pair to test with one
    row, command = rows[0].split(" | "), rows[1].split(" | ")[-1]
    deterministic = 100 * (1 - load_checkpoint(hard_checkpoint)["test_accuracy"])
    assert row[0] == "| `ram-cluttered60.pt`"
    cells = []  # every error with its 95 % interval: the fixed canvases, fresh ones, sampled trajectories
    for cell in row[1:4]:
        error, interval = cell.split(" (")
        low, high = map(float, interval.rstrip(")").split("-"))
        assert 0 <= low <= float(error) <= high <= 100
        cells.append(float(error))
    assert cells[0] == pytest.approx(deterministic, abs=0.006) and row[4] == "<= 2.5"
    assert command.startswith("`python train.py --mode hard --arch ram --preset cluttered60") and "--max-steps" not in command


def test_checkpoint_table_writes_todays_options_for_runs_saved_under_old_names():
    from glimpse.training.config import TrainConfig

    saved = TrainConfig(preset="cluttered60").to_dict()
    del saved["reinforce_into_core"]  # runs before the option recorded detach_policy_input
    assert recipe_command({**saved, "detach_policy_input": True}) == "python train.py --mode hard --arch ram --preset cluttered60"
    assert recipe_command({**saved, "detach_policy_input": False}).endswith("--preset cluttered60 --reinforce-into-core 1.0")


def test_checkpoint_table_leaves_out_where_a_run_ran():
    """A run resumed on another device (--resume --device cpu) keeps the recipe's command."""
    from glimpse.training.config import TrainConfig

    resumed = TrainConfig(preset="cluttered60", device="cpu", threads=8).to_dict()
    assert recipe_command(resumed) == "python train.py --mode hard --arch ram --preset cluttered60"


def test_checkpoint_table_only_rescores_the_named_rows(hard_checkpoint, tmp_path, monkeypatch, capsys):
    """--only NAME scores that checkpoint again and takes every other row from the scores file."""
    import json
    import shutil

    table = load_checkpoint_table()
    shutil.copy(hard_checkpoint, tmp_path / "a.pt")
    shutil.copy(hard_checkpoint, tmp_path / "b.pt")
    scores = tmp_path / "scores.json"
    kept = {"checkpoint": "b.pt", "n": 10, "test_error": 0.5, "fresh_error": 0.5, "train_minutes": 1.0, "command": "x"}
    scores.write_text(json.dumps({"benchmark": 1, "samples": 0, "rows": [kept]}))
    monkeypatch.setattr(table.scores, "SCORES", scores)
    argv = ["--checkpoints", str(tmp_path), "--data-dir", "bundled", "--samples", "0"]
    assert table.main([*argv, "--only", "a.pt"]) == 0
    out = capsys.readouterr().out
    assert "| `b.pt` | 50.00 (" in out and "| `a.pt` | " in out
    assert table.main([*argv, "--only", "missing.pt"]) == 2
    assert "no missing.pt" in capsys.readouterr().err
    # a checkpoint with no kept row must be scored too; the kept rows' trajectory count is the file's
    shutil.copy(hard_checkpoint, tmp_path / "c.pt")
    assert table.main([*argv, "--only", "a.pt"]) == 2
    assert "c.pt in " in capsys.readouterr().err
    assert table.main([*argv[:-2], "--samples", "2", "--only", "a.pt", "c.pt"]) == 2
    assert "averaged 0 trajectories" in capsys.readouterr().err
    assert table.main([*argv[:-2], "--only", "a.pt", "c.pt"]) == 0  # no --samples: the file's 0


def test_checkpoint_table_draws_fresh_first_glimpses_for_a_random_first_glimpse(monkeypatch, tmp_path):
    """A model whose first glimpse falls at random: its test error is the mean over evaluation
    seeds 0-4, and its fresh column uses fresh canvases *and* evaluation seeds 5-9 (on centred
    digits the canvases cannot differ, so only new draws make the column an independent check)."""
    table = load_checkpoint_table()
    calls = []

    def fake_evaluation(path, data_dir=None, seed=0, canvas_seed=None, limit=None, progress=True, **_):
        calls.append((canvas_seed, seed, limit))
        return {"error": 0.01 * (seed + 1), "n": 100, "kind": "ram", "train_seconds": 60.0,
                "train_config": {"first_location": how}, "seed_dependent": how == "random"}

    table = table.scores  # the scoring itself
    monkeypatch.setattr(table, "evaluate_checkpoint", fake_evaluation)
    monkeypatch.setattr(table, "staged_recipe_command", lambda stages: "python train.py")
    how = "random"
    row = table.score(tmp_path / "a.pt", None, samples=0)
    fresh = [seed for canvas_seed, seed, _ in calls if canvas_seed == table.FRESH_SEED]
    assert fresh == [5, 6, 7, 8, 9] and row["fresh_eval_seeds"] == fresh
    assert row["test_error"] == pytest.approx(0.03) and row["fresh_error"] == pytest.approx(0.08)
    assert ", mean of seeds 5-9)" in table.table([row], samples=0)
    calls.clear()
    how = "centre"  # deterministic: one evaluation of each set, no seeds in the table
    row = table.score(tmp_path / "b.pt", None, samples=0)
    assert [seed for canvas_seed, seed, _ in calls if canvas_seed == table.FRESH_SEED] == [0]
    assert "eval_seeds" not in row and "mean of seeds" not in table.table([row], samples=0)


def test_pictures_are_drawn_once_a_step_when_a_validation_falls_on_an_image_step(tmp_path):
    code, run = run_train(tmp_path, "pictures", "--preset", "mnist28", "--max-steps", "6", "--batch-size", "32",
                          "--image-every", "3", "--val-every", "6")
    assert code == 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run), size_guidance={"images": 0})
    events.Reload()
    assert [e.step for e in events.Images("attention/where_it_looks")] == [3, 6]


def test_images_per_second_leave_out_what_the_callbacks_set_aside(monkeypatch):
    """A validation inside a logging window is not training time: 40 images in a 10 s window
    with 6 s of it set aside are 10 images per second, not 4."""
    from types import SimpleNamespace

    from glimpse.training import callbacks
    from glimpse.training.state import RunState, StepResult

    clock = iter([0.0, 2.0, 8.0, 10.0])  # the window opens; validation from 2 to 8 s; the log at 10 s
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: next(clock))
    log = callbacks.ScalarLog()
    logged = {}
    run = SimpleNamespace(aside=0.0, is_log_step=lambda done: True, device=torch.device("cpu"), steps_per_epoch=10,
                          logger=SimpleNamespace(scalars=lambda values, step: logged.update(values)),
                          show=lambda **values: None)
    with RunState.set_aside(run):
        pass
    metrics = {"losses/total": torch.tensor(1.0), "train/accuracy": torch.tensor(0.5)}
    log.after_step(run, 1, StepResult(torch.tensor(1.0), metrics, 0.1, {}, 40))
    assert run.aside == 6.0 and logged["perf/images_per_second"] == 10.0



def test_a_resume_with_another_budget_is_recorded_and_its_commands_rebuild_the_run(tmp_path, monkeypatch):
    """Resuming with another --epochs changes the cosine's length from there on: the checkpoints record
    the change (``budget_changes``), and the command the checkpoint table shows for the run (its first
    budget capped at the change, then the resume) trains the same weights, which the last budget from
    the start does not."""
    import shlex

    from glimpse.checkpoint import training_stages

    args = ["--preset", "mnist28", "--batch-size", "32", "--warmup-steps", "0", "--checkpoint-every", "4",
            "--val-every", "4", "--log-every", "4"]
    assert run_train(tmp_path, "r", *args, "--epochs", "2", "--max-steps", "6")[0] == 0
    assert train.main(["--resume", str(tmp_path / "r"), "--epochs", "3", "--max-steps", "12"]) == 0
    resumed = load_checkpoint(tmp_path / "r" / "last.pt")
    assert resumed["budget_changes"] == [{"step": 6, "epochs": 2}] and resumed["train_config"]["epochs"] == 3
    assert load_checkpoint(tmp_path / "r" / "best.pt")["budget_changes"] == [{"step": 6, "epochs": 2}]
    first, second = staged_recipe_command(training_stages(resumed)).split(" && ")
    assert first.startswith("python train.py ") and " --epochs 2 " in first and first.endswith(" --run-name r --max-steps 6")
    assert second == "python train.py --resume runs/r --epochs 3 --max-steps 0"
    again = tmp_path / "again"
    again.mkdir()
    monkeypatch.chdir(again)
    assert train.main([*shlex.split(first)[2:], *FAST]) == 0
    assert train.main([*shlex.split(second)[2:-1], "12"]) == 0  # capped where the run was, not at its end
    assert load_checkpoint(again / "runs" / "r" / "last.pt")["step"] == 12
    assert_same_weights(weights(tmp_path / "r" / "last.pt"), weights(again / "runs" / "r" / "last.pt"))
    assert run_train(tmp_path, "straight", *args, "--epochs", "3", "--max-steps", "12")[0] == 0
    straight = weights(tmp_path / "straight" / "last.pt")
    assert any(not torch.equal(straight[k], v) for k, v in weights(tmp_path / "r" / "last.pt").items())
    assert "budget_changes" not in load_checkpoint(tmp_path / "straight" / "last.pt")


def test_the_learning_rate_warms_up_linearly_then_follows_a_cosine_to_zero():
    from glimpse.training.config import TrainConfig

    config = TrainConfig(lr=1e-3, warmup_steps=10)
    assert loop.learning_rate(config, 0, 100) == pytest.approx(1e-4)  # 1/10 of the warm-up, cosine(0) = 1
    assert loop.learning_rate(config, 4, 100) == pytest.approx(1e-3 * 0.5 * 0.5 * (1 + math.cos(math.pi * 0.04)))
    assert loop.learning_rate(config, 9, 100) == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.09)))
    assert loop.learning_rate(config, 50, 100) == pytest.approx(5e-4)  # half way down the cosine
    assert loop.learning_rate(config, 100, 100) == pytest.approx(0.0, abs=1e-15)
    no_warmup = TrainConfig(lr=1e-3, warmup_steps=0)
    assert loop.learning_rate(no_warmup, 0, 100) == 1e-3 and loop.learning_rate(no_warmup, 25, 100) < 1e-3
