"""Runs that cannot collide, escape or mislead: every flag checked before anything is created,
a run directory owned by one process, files that fail cleanly, layouts refused at make."""
import errno
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from glimpse.commands import evaluate
from glimpse.commands import train
from glimpse.checkpoint import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["--preset", "mnist28", "--data-dir", "bundled", "--threads", "1", "--batch-size", "32",
         "--eval-batch-size", "1000", "--image-every", "0"]


@pytest.mark.parametrize("argv,match", [
    (["--batch-size", "0"], "batch-size"),
    (["--lr", "-1"], "lr"),
    (["--glimpse-size", "80"], "larger than the canvas"),
    (["--data-dir", "/nonexistent/mnist"], "no MNIST"),
    (["--resume", "/nonexistent/run"], "does not exist"),
    (["--location-std-final", "-0.1"], "location-std-final"),
    (["--reinforce-into-core", "2"], "reinforce-into-core"),
    (["--mode", "soft", "--soft-arch", "draw", "--draw-min-sigma-strides", "-0.1"], "draw-min-sigma-strides"),
    (["--mode", "soft", "--soft-arch", "draw", "--attention-into-core", "-0.1"], "attention-into-core"),
    (["--checkpoint-every", "0"], "--checkpoint-every must be >= 1"),
    (["--checkpoint-every", "-1"], "--checkpoint-every must be >= 1"),
    (["--threads", "-1"], "--threads must be >= 0"),
    (["--batch-size", "1000000000"], "--batch-size 1000000000 is more than MNIST has"),
    (["--eval-batch-size", "0"], "--eval-batch-size must be >= 1"),
    (["--max-steps", "-1"], "--max-steps must be >= 0"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--seed", str(2**40)], "--seed must be below 2**32"),
    (["--lr", "inf"], "--lr must be a finite number"),
    (["--lr", "nan"], "--lr must be a finite number"),
    (["--location-std", "nan"], "--location-std must be a finite number"),
    (["--grad-clip", "-1"], "--grad-clip must be >= 0"),
    (["--warmup-steps", "-5"], "--warmup-steps must be >= 0"),
    (["--run-name", "../../x"], "--run-name must be a plain name"),
    (["--run-name", "a/b"], "--run-name must be a plain name"),
    (["--run-name", ".."], "--run-name must be a plain name"),
    (["--n-digits", "5", "--preset", "cluttered60"], "at most 4 non-overlapping"),
    (["--mode", "soft", "--soft-arch", "stn", "--canvas-size", "28"], "canvas_size must be >= 32"),
    (["--mode", "soft", "--soft-arch", "draw", "--reinforce-samples", "4"],
     "draw (DRAW read (soft)) does not use --reinforce-samples (an option of ram, dram)"),
    (["--mode", "soft", "--soft-arch", "stn", "--preset", "cluttered60", "--n-glimpses", "4"], "does not use --n-glimpses"),
    (["--soft-arch", "draw"], "does not use --soft-arch (the old spelling of --arch for --mode soft)"),
    (["--init-from", "/nonexistent/best.pt"], "checkpoint /nonexistent/best.pt does not exist"),
    (["--init-from", str(ROOT / "checkpoints" / "sat-cluttered60.pt")], "holds a sat model; this run trains ram"),
    (["--init-from", str(ROOT / "checkpoints" / "ram-cluttered60.pt")], "its weights do not fit this model"),
    # sizes with a natural range: refused with the option named, before anything is allocated
    (["--mode", "soft", "--arch", "draw", "--read-size", "1000"], "read_size must be between 1 and the canvas size"),
    (["--mode", "soft", "--arch", "draw", "--read-size", "0"], "--read-size must be >= 1"),
    (["--mode", "soft", "--arch", "draw", "--read-size", "-3"], "--read-size must be >= 1"),
    (["--n-glimpses", "1000000000"], "--n-glimpses must be at most 64"),
    (["--hidden-size", "10000000"], "--hidden-size must be at most 8192"),
    (["--canvas-size", "100000"], "--canvas-size must be at most 1024"),
    (["--n-scales", "64"], "--n-scales 64: the widest scale would be"),
    (["--n-scales", "40"], "--n-scales 40: the widest scale would be"),
    (["--reinforce-samples", "65"], "--reinforce-samples must be at most 64"),
    (["--run-name", "x" * 300], "--run-name"),
])
def test_a_bad_flag_is_refused_before_anything_is_created(argv, match, tmp_path, capsys):
    runs = tmp_path / "runs"
    assert train.main([*QUICK, *argv, "--run-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert not runs.exists(), "a refused start must leave no directory behind"


@pytest.mark.parametrize("argv,match", [
    (["--samples", "1000000000"], "--samples must be at most 1000"),
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--threads", "5000"], "--threads must be between 1 and 1024"),
    (["--canvas-seed", str(2**70)], "--canvas-seed must be >= 0 and below 2**63"),
])
def test_evaluate_refuses_the_sizes_train_py_refuses(argv, match, capsys):
    from glimpse.commands import evaluate

    assert evaluate.main(["--checkpoint", str(ROOT / "checkpoints" / "ram-cluttered60.pt"), "--data-dir", "bundled",
                          *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


@pytest.mark.parametrize("argv,match", [
    (["--budget", "inf"], "--budget must be a number above 0"),
    (["--seeds", "1000000000"], "--seeds must be at most 100"),
    (["--runs", str(ROOT / "README.md")], "is a file, not a directory"),
])
def test_report_refuses_unbounded_budgets_and_a_runs_file(argv, match, capsys):
    from glimpse.commands import report

    assert report.main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_a_run_dir_that_is_a_file_is_refused(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert train.main([*QUICK, "--run-dir", str(blocker), "--max-steps", "1"]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert blocker.read_text() == "not a directory"


def test_a_start_that_fails_after_the_lock_leaves_no_directory(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--data-dir", str(tmp_path / "nomnist"), "--run-dir", str(runs),
                       "--run-name", "r"]) == 2
    assert "no MNIST" in capsys.readouterr().err
    assert not (runs / "r").exists()


HOLDER = """
import sys, time
from glimpse.training.rundir import RunDirectory
held = RunDirectory(sys.argv[1]).acquire()  # the lock lives as long as this object
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_run_on_a_directory_in_use_is_refused_and_a_killed_holder_frees_it(tmp_path, capsys):
    run = tmp_path / "runs" / "shared"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        argv = [*QUICK, "--run-dir", str(run.parent), "--run-name", "shared", "--max-steps", "2"]
        assert train.main(argv) == 2
        assert f"in use by another run (process {holder.pid})" in capsys.readouterr().err
        assert not (run / "last.pt").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the kernel released the lock with the process: no stale lock
    assert train.main([*QUICK, "--run-dir", str(run.parent), "--run-name", "shared", "--max-steps", "2",
                       "--checkpoint-every", "1"]) == 0
    assert load_checkpoint(run / "last.pt")["step"] == 2


def test_a_run_starting_while_a_report_looks_at_its_lock_is_not_refused(tmp_path):
    """``live_holder`` holds a shared lock for an instant to look; a run that starts in that instant
    waits for it instead of being refused as if another run held the directory."""
    import fcntl
    import threading

    from glimpse.training.rundir import LOCK_NAME, RunDirectory, RunLocked

    run = tmp_path / "run"
    RunDirectory(run).acquire().release()
    look = open(run / LOCK_NAME)
    fcntl.flock(look, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a look that lasts 0.1 s, not an instant
    threading.Timer(0.1, lambda: fcntl.flock(look, fcntl.LOCK_UN)).start()
    held = RunDirectory(run).acquire()
    look.close()
    with pytest.raises(RunLocked, match="in use by another run"):  # a run's own lock still refuses
        RunDirectory(run).acquire()
    held.release()


def test_resume_writes_to_the_directory_given_wherever_the_run_moved(tmp_path, capsys):
    runs = tmp_path / "runs"
    argv = [*QUICK, "--run-dir", str(runs), "--run-name", "m", "--max-steps", "2", "--checkpoint-every", "1"]
    assert train.main(argv) == 0
    (runs / "m").rename(runs / "moved")
    assert train.main(["--resume", str(runs / "moved"), "--max-steps", "3"]) == 0
    assert not (runs / "m").exists(), "resume must not recreate the old directory"
    assert load_checkpoint(runs / "moved" / "last.pt")["step"] == 3
    assert "moved" in capsys.readouterr().out


def test_a_full_disk_stops_the_run_with_the_last_checkpoint_intact(tmp_path, monkeypatch, capsys):
    """The disk fails as a real one does: the file's write raises ENOSPC (which torch.save, writing
    to the file itself, would turn into 'RuntimeError: [enforce fail at inline_container.cc] ...')."""
    import os

    runs = tmp_path / "runs"
    real_fdopen, calls = os.fdopen, []

    class FullDisk:  # the disk fills up in the middle of the file, after its first writes
        def __init__(self, handle):
            self.handle, self.writes = handle, 0

        def write(self, data):
            self.writes += 1
            if self.writes > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.handle.write(data[:16])  # a short write: the rest did not fit

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def fdopen(fd, *args, **kwargs):
        calls.append(1)
        handle = real_fdopen(fd, *args, **kwargs)
        return FullDisk(handle) if len(calls) > 2 else handle  # last.pt at steps 1 and 2, then the disk is full

    monkeypatch.setattr(os, "fdopen", fdopen)
    argv = [*QUICK, "--run-dir", str(runs), "--run-name", "full", "--max-steps", "5", "--checkpoint-every", "1"]
    assert train.main(argv) == 1  # the machine's failure, not bad input
    err = capsys.readouterr().err
    assert "No space left on device" in err and "the previous last.pt is intact" in err and "Traceback" not in err
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert load_checkpoint(runs / "full" / "last.pt")["step"] == 2
    assert not list((runs / "full").glob("*.tmp")) and not list((runs / "full").glob(".*.tmp"))
    # a kill in the middle of a write leaves a temporary file: the next start removes it
    (runs / "full" / ".last.pt.abc123.tmp").write_bytes(b"torn")
    assert train.main(["--resume", str(runs / "full")]) == 0
    assert not list((runs / "full").glob(".*.tmp"))


def test_a_run_that_diverges_before_any_checkpoint_says_so(tmp_path, monkeypatch, capsys):
    from glimpse.training import hard

    def poisoned(self, indices, step_seed):
        loss, metrics = original(self, indices, step_seed)
        return loss * float("nan"), metrics

    original = hard.HardAttentionLearner.loss
    monkeypatch.setattr(hard.HardAttentionLearner, "loss", poisoned)
    assert train.main([*QUICK, "--run-dir", str(tmp_path), "--run-name", "nan", "--max-steps", "3"]) == 1
    assert "No checkpoint was written yet" in capsys.readouterr().err


def test_checkpoints_record_their_provenance_and_evaluate_prints_it(tmp_path, capsys):
    argv = [*QUICK, "--run-dir", str(tmp_path), "--run-name", "p", "--max-steps", "2", "--device", "cpu"]
    assert train.main(argv) == 0
    origin = load_checkpoint(tmp_path / "p" / "best.pt")["provenance"]
    assert origin["torch"] == torch.__version__ and origin["device"] == "cpu"
    assert len(origin["data_sha256"]) == 64 and origin["commit"]
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(tmp_path / "p" / "best.pt"), "--data-dir", "bundled"]) == 0
    assert f"with torch {torch.__version__} on cpu" in capsys.readouterr().out


def test_evaluate_refuses_a_truncated_npz_and_non_finite_weights(tmp_path, capsys):
    good = tmp_path / "canvases.npz"
    np.savez_compressed(good, images=np.zeros((4, 60, 60), np.uint8), labels=np.zeros(4, np.int64))
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    shipped = ROOT / "checkpoints" / "sat-cluttered60.pt"
    assert evaluate.main(["--checkpoint", str(shipped), "--images", str(truncated)]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "Traceback" not in err

    payload = load_checkpoint(shipped)
    payload["model_state"] = {k: v.clone() for k, v in payload["model_state"].items()}
    next(iter(payload["model_state"].values())).fill_(float("nan"))
    save_checkpoint(tmp_path / "nan.pt", {k: v for k, v in payload.items() if k != "format"})
    assert evaluate.main(["--checkpoint", str(tmp_path / "nan.pt"), "--images", str(good)]) == 2
    assert "weights are not finite" in capsys.readouterr().err


@pytest.mark.parametrize("size,digits", [(60, 3), (56, 4)])
def test_every_digit_count_the_env_accepts_always_places(size, digits):
    env = gymnasium.make_vec("glimpse/ClutteredMNIST60-v1", num_envs=64, vectorization_mode="vector_entry_point",
                             canvas_size=size, n_digits=digits, data_dir="bundled")
    for seed in range(5):
        env.reset(seed=seed)
        xy = env.unwrapped.engine.digit_xy.numpy()
        i, j = np.triu_indices(digits, 1)
        assert not (np.abs(xy[:, i] - xy[:, j]) < 28).all(-1).any()
        assert xy.min() >= 0 and xy.max() <= size - 28
    with pytest.raises(ValueError, match="at most 4"):
        gymnasium.make("glimpse/ClutteredMNIST60-v1", canvas_size=56, n_digits=5)


def test_a_redirected_run_prints_progress_lines(tmp_path, monkeypatch, capsys):
    """Off a terminal (a job, a notebook, CI) training says how far it is every few seconds."""
    from glimpse import progress

    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.0)
    assert train.main([*QUICK, "--run-dir", str(tmp_path), "--run-name", "lines", "--max-steps", "3"]) == 0
    err = capsys.readouterr().err
    assert "train: 1/3 step (33 %)" in err and "train: 3/3 step (100 %)" in err and "step/s" in err


def test_progress_lines_leave_out_the_time_left_when_asked(capsys):
    """The report's runs differ in length by hours: its line counts them and gives no rate or time left."""
    from glimpse.progress import LineProgress

    for timed in (True, False):
        with LineProgress(total=4, desc="report runs", unit="run", every=0.0, timed=timed) as bar:
            bar.update(1)
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith("report runs: 1/4 run (25 %)")
        assert ("left" in lines[0]) == ("run/s" in lines[0]) == timed


def _broken_weights(payload):
    name = next(iter(payload["model_state"]))
    payload["model_state"][name] = torch.zeros(3, 3)


def _two_groups(payload):
    payload["optimizer_state"]["param_groups"].append(dict(payload["optimizer_state"]["param_groups"][0]))


@pytest.mark.parametrize("break_it,match", [
    (_broken_weights, "its weights or optimiser state do not fit the model its train_config builds (Error(s) in "
                      "loading state_dict"),
    (lambda p: p.pop("step"), "cannot be resumed: 'step' (missing, not int)"),
    (lambda p: p.pop("train_config"), "cannot be resumed: 'train_config' (missing, not dict)"),
    (lambda p: p.update(model_state="x"), "'model_state' must be a dict, got str"),
    (lambda p: p["train_config"].update(bogus=1), "its train_config does not fit this version's options"),
    (_two_groups, "different number of parameter groups"),
])
def test_resuming_a_broken_last_pt_exits_2_and_names_the_file(break_it, match, tmp_path, capsys):
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--run-dir", str(runs), "--run-name", "r", "--max-steps", "2"]) == 0
    payload = {k: v for k, v in load_checkpoint(runs / "r" / "last.pt").items() if k != "format"}
    break_it(payload)
    save_checkpoint(runs / "r" / "last.pt", payload)
    capsys.readouterr()
    assert train.main(["--resume", str(runs / "r"), "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert str(runs / "r" / "last.pt") in err and match in err and "Traceback" not in err


@pytest.mark.parametrize("break_it,match", [
    (lambda p: p.update(task={}), "its task lacks canvas_size"),
    (lambda p: p["task"].update(canvas_size=-5), "its task does not make canvases (canvas_size must be"),
    (lambda p: p["task"].update(canvas_size="big"), "its task does not make canvases"),
    (lambda p: p.update(model_state="x"), "'model_state' must be a dict, got str"),
])
def test_evaluating_a_broken_checkpoint_exits_2_and_names_the_file(break_it, match, tmp_path, capsys):
    from glimpse.commands import evaluate

    payload = {k: v for k, v in load_checkpoint(ROOT / "checkpoints" / "ram-cluttered60.pt").items() if k != "format"}
    break_it(payload)
    save_checkpoint(tmp_path / "broken.pt", payload)
    assert evaluate.main(["--checkpoint", str(tmp_path / "broken.pt"), "--data-dir", "bundled"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "broken.pt") in err and match in err and "Traceback" not in err


def test_resume_refuses_a_step_cap_the_run_has_passed_before_it_starts(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--run-dir", str(runs), "--run-name", "r", "--max-steps", "3"]) == 0
    before = load_checkpoint(runs / "r" / "last.pt")["step"]
    capsys.readouterr()
    assert train.main(["--resume", str(runs / "r"), "--max-steps", "2"]) == 2
    assert "already at step 3; nothing to train" in capsys.readouterr().err
    assert load_checkpoint(runs / "r" / "last.pt")["step"] == before



def test_resume_refuses_fewer_epochs_than_the_run_has_trained(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--run-dir", str(runs), "--run-name", "r", "--batch-size", "2048", "--epochs", "2"]) == 0
    before = load_checkpoint(runs / "r" / "last.pt")
    capsys.readouterr()
    assert train.main(["--resume", str(runs / "r"), "--epochs", "1"]) == 2
    assert f"already at step {before['step']}; nothing to train" in capsys.readouterr().err
    after = load_checkpoint(runs / "r" / "last.pt")
    assert after["step"] == before["step"] and after["train_config"]["epochs"] == 2
    assert load_checkpoint(runs / "r" / "best.pt")["train_config"]["epochs"] == 2  # nothing rewritten


def test_resume_refuses_data_other_than_the_run_trained_on(tmp_path, capsys):
    """--data-dir may say where the digits are on this machine, not swap them for others (the
    bundled subset for full MNIST changes the epoch, the order and the schedule)."""
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--run-dir", str(runs), "--run-name", "r", "--max-steps", "3"]) == 0
    last = load_checkpoint(runs / "r" / "last.pt")
    last["provenance"]["data_sha256"] = "0" * 64  # as if trained on other digits
    save_checkpoint(runs / "r" / "last.pt", {k: v for k, v in last.items() if k != "format"})
    capsys.readouterr()
    assert train.main(["--resume", str(runs / "r"), "--max-steps", "6"]) == 2
    assert "was trained on other digits (sha256 0000000000000000...)" in capsys.readouterr().err
    assert load_checkpoint(runs / "r" / "last.pt")["step"] == 3


def test_a_diverged_model_never_overwrites_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    """The guard reads the losses on every step that writes last.pt, not only when it logs."""
    from glimpse.training import hard

    def poisoned_after_two(self, indices, step_seed):
        loss, metrics = original(self, indices, step_seed)
        calls.append(1)
        return (loss * float("nan") if len(calls) > 2 else loss), metrics

    calls, original = [], hard.HardAttentionLearner.loss
    monkeypatch.setattr(hard.HardAttentionLearner, "loss", poisoned_after_two)
    args = [*QUICK, "--run-dir", str(tmp_path), "--run-name", "nan", "--max-steps", "8", "--checkpoint-every", "2",
            "--log-every", "100", "--val-every", "100"]
    assert train.main(args) == 1
    assert f"The last good checkpoint is {tmp_path / 'nan' / 'last.pt'}" in capsys.readouterr().err
    last = load_checkpoint(tmp_path / "nan" / "last.pt")
    assert last["step"] == 2 and all(torch.isfinite(v).all() for v in last["model_state"].values())


@pytest.mark.parametrize("clip", ["5", "0"])
def test_a_nan_gradient_under_a_finite_loss_never_reaches_last_pt(tmp_path, monkeypatch, capsys, clip):
    """sqrt at 0 is finite forward and infinite backward: step 4's loss is finite, its update NaN,
    and step 4 writes last.pt. Caught by the clipped norm (clip 5) or by the weights (clip 0)."""
    from glimpse.training import hard

    def nan_gradient_at_four(self, indices, step_seed):
        loss, metrics = original(self, indices, step_seed)
        calls.append(1)
        if len(calls) == 4:
            loss = loss + 0 * torch.sqrt(0 * next(self.model.parameters()).sum())
        return loss, metrics

    calls, original = [], hard.HardAttentionLearner.loss
    monkeypatch.setattr(hard.HardAttentionLearner, "loss", nan_gradient_at_four)
    args = [*QUICK, "--run-dir", str(tmp_path), "--run-name", "nan", "--max-steps", "8", "--checkpoint-every", "2",
            "--log-every", "100", "--val-every", "100", "--grad-clip", clip]
    assert train.main(args) == 1
    assert "became nan or inf at a step between 2 and 3" in capsys.readouterr().err
    last = load_checkpoint(tmp_path / "nan" / "last.pt")
    assert last["step"] == 2 and all(torch.isfinite(v).all() for v in last["model_state"].values())



def test_a_run_directory_it_cannot_write_in_is_named(tmp_path, monkeypatch, capsys):
    from glimpse.training import rundir

    def read_only(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(rundir, "open", read_only, raising=False)  # as a directory this user may not write to
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--run-dir", str(runs), "--run-name", "r", "--max-steps", "1"]) == 2
    assert f"cannot write in run directory {runs / 'r'}: Permission denied" in capsys.readouterr().err
    assert not runs.exists()  # nothing left behind


def test_argparse_errors_are_one_line_and_a_kept_or_finished_run_is_not_taken_over(tmp_path, capsys):
    """An unknown choice or a mistyped number is one line and exit 2, like every other bad input; an
    empty --run-dir is refused; a directory holding a best.pt (no last.pt) is not overwritten; a
    finished run is not resumed for nothing; a bad --epochs on resume blames the option, not the file."""
    for argv, match in ((["--preset", "nope"], "argument --preset: invalid choice: 'nope'"),
                        (["--batch-size", "abc"], "argument --batch-size: invalid int value: 'abc'")):
        with pytest.raises(SystemExit) as stopped:
            train.main([*QUICK, *argv])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and match in err and len(err.strip().splitlines()) == 1
    assert train.main([*QUICK, "--run-dir", ""]) == 2
    assert "--run-dir must name a directory" in capsys.readouterr().err
    runs = tmp_path / "runs"
    assert train.main([*QUICK, "--max-steps", "2", "--run-dir", str(runs), "--run-name", "done"]) == 0
    best = runs / "done" / "best.pt"
    assert train.main([*QUICK, "--resume", str(runs / "done")]) == 2  # finished and tested: nothing to train
    assert "has finished (step 2 of 2, tested); nothing to train (give a larger --max-steps" in capsys.readouterr().err
    assert train.main([*QUICK, "--resume", str(runs / "done"), "--epochs", "0"]) == 2
    err = capsys.readouterr().err
    assert "--epochs must be >= 1" in err and "last.pt" not in err
    (runs / "done" / "last.pt").unlink()
    kept = best.read_bytes()
    assert train.main([*QUICK, "--max-steps", "2", "--run-dir", str(runs), "--run-name", "done"]) == 2
    assert "already holds a model (best.pt) and no last.pt" in capsys.readouterr().err and best.read_bytes() == kept
