"""torchrun with 2 CPU processes (gloo) trains what one process with the same global batch trains."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from glimpse.commands import train
from glimpse.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--data-dir", "bundled", "--threads", "1", "--device", "cpu", "--eval-batch-size", "1000",
        "--image-every", "0", "--log-every", "1"]

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with the gloo backend is not available")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# the timeouts only stop a hang (two ranks on a busy 2-core runner take tens of seconds); they time nothing
def torchrun(n: int, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                            "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}", "--master_addr=127.0.0.1",
               f"--master_port={free_port()}", str(ROOT / "train.py"), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def scalars(run_dir: Path, tag: str) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


@pytest.mark.parametrize("mode", [["--mode", "hard"], ["--mode", "hard", "--reinforce-samples", "2"],
                                  ["--mode", "soft", "--soft-arch", "draw", "--hidden-size", "64"]],
                         ids=["ram", "ram-two-samples", "draw"])
def test_two_processes_train_what_one_process_trains(tmp_path, mode):
    args = [*FAST, "--preset", "cluttered60", "--batch-size", "32", "--max-steps", "6", "--val-every", "3",
            "--checkpoint-every", "2", *mode, "--run-dir", str(tmp_path)]
    result = torchrun(2, *args, "--run-name", "two")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("test accuracy") == 1  # rank 0 alone reports
    assert train.main([*args, "--run-name", "one"]) == 0

    two, one = load_checkpoint(tmp_path / "two" / "last.pt"), load_checkpoint(tmp_path / "one" / "last.pt")
    assert two["step"] == one["step"] == 6
    assert two["model_state"].keys() == one["model_state"].keys()
    for key, value in one["model_state"].items():
        torch.testing.assert_close(two["model_state"][key], value, rtol=1e-5, atol=1e-5, msg=key)
    # the logged metrics are means over the processes, i.e. over the global batch
    for tag in ("losses/total", "train/accuracy"):
        assert scalars(tmp_path / "two", tag) == pytest.approx(scalars(tmp_path / "one", tag), rel=1e-4, abs=1e-5)
    assert len(list((tmp_path / "two").glob("events.out.tfevents.*"))) == 1  # only rank 0 writes TensorBoard


@pytest.mark.parametrize("unused", [["--n-glimpses", "1"], ["--random-glimpses", "--first-location", "random"]])
def test_parameters_a_run_leaves_unused_train_across_processes(tmp_path, unused):
    """One glimpse uses neither the policy nor the core's recurrent weights, random glimpses no
    policy: the family tells DDP so."""
    result = torchrun(2, *FAST, "--mode", "hard", "--preset", "mnist28", *unused, "--batch-size", "16",
                      "--max-steps", "2", "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]


LEFTOVER_THREADS = """
import os, sys, threading
from glimpse.commands import train
code = train.main(sys.argv[1:])
python_ids = {thread.native_id for thread in threading.enumerate()}
native = [open(f"/proc/self/task/{tid}/comm").read().strip() for tid in os.listdir("/proc/self/task")
          if int(tid) not in python_ids]
print(f"rank {os.environ['RANK']}: exit {code}, threads without Python {len(native)} {native}")
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_leaving_the_group_stops_its_threads(tmp_path):
    """After main() no gloo thread may be left: one still releasing a collective's tensors while the
    interpreter shuts down aborts the process (seen as a rare SIGABRT of a rank that had finished)."""
    script = tmp_path / "count_threads.py"
    script.write_text(f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + LEFTOVER_THREADS)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CUDA driver's own threads are not the group's
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={free_port()}", str(script), *FAST, "--mode", "soft", "--soft-arch", "draw",
               "--hidden-size", "64", "--batch-size", "16", "--max-steps", "2", "--run-dir", str(tmp_path / "runs")]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: exit 0, threads without Python 0 []" in result.stdout, result.stdout  # (names if not)


def test_batch_not_divisible_by_processes_is_a_clear_error(tmp_path):
    result = torchrun(2, *FAST, "--batch-size", "33", "--max-steps", "1", "--run-dir", str(tmp_path), timeout=600)
    assert result.returncode != 0
    assert "--batch-size 33 is the global batch and must be divisible by the number of processes (2)" in result.stderr
    assert not list(tmp_path.iterdir())  # nothing was written


def test_batch_norm_on_cpu_processes_is_a_clear_error(tmp_path):
    """Each CPU process would normalise by its own slice (SyncBatchNorm runs on GPUs only): refused."""
    result = torchrun(2, *FAST, "--mode", "full", "--arch", "resnet", "--preset", "cluttered60", "--batch-size", "16",
                      "--max-steps", "1", "--run-dir", str(tmp_path), timeout=600)
    assert result.returncode != 0
    assert "this model has batch norm, which several processes can only normalise over the global batch" in result.stderr
    assert not list(tmp_path.iterdir())  # nothing was written


def test_batch_norm_is_synchronised_across_gpu_processes_and_keeps_its_parameters():
    """On GPUs every batch-norm layer becomes a SyncBatchNorm sharing the layer's parameters and
    running statistics (the optimizer keeps stepping them; checkpoints keep their keys); a model
    without batch norm is left as it is, on any device. The conversion moves nothing, so it runs here."""
    from glimpse.models import build_model
    from glimpse.training.config import resolve_config
    from glimpse.training.distributed import synchronise_batch_norm

    def model(arch: str, mode: str) -> torch.nn.Module:
        config = resolve_config({"preset": "cluttered60", "mode": mode, "arch": arch})
        return build_model(config.family.name, config.family.model_config(config))

    resnet = model("resnet", "full")
    before = dict(resnet.named_parameters())
    keys = resnet.state_dict().keys()
    with pytest.raises(ValueError, match="batch norm"):
        synchronise_batch_norm(resnet, torch.device("cpu"))
    synced = synchronise_batch_norm(resnet, torch.device("cuda"))
    kinds = {type(m) for m in synced.modules()}
    assert torch.nn.SyncBatchNorm in kinds and torch.nn.BatchNorm2d not in kinds
    assert all(p is before[name] for name, p in synced.named_parameters())
    assert synced.state_dict().keys() == keys
    ram = model("ram", "hard")
    assert synchronise_batch_norm(ram, torch.device("cpu")) is ram
