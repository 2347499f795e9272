"""Multi-process training under torchrun: one process per CPU slot or GPU, one process group.

``torchrun --nproc_per_node=N train.py ...`` sets RANK, WORLD_SIZE and LOCAL_RANK; a plain
``python train.py`` sets none of them and everything here degrades to world size 1 without a
process group. gloo is the backend on CPU, NCCL on GPUs.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


def is_main() -> bool:
    return rank() == 0


def resolve_device(name: str) -> torch.device:
    """``auto``: a GPU when there is one; under torchrun each process takes GPU LOCAL_RANK."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA GPU is available (use --device cpu or auto)")
        if not launched_by_torchrun():
            return torch.device("cuda", torch.cuda.current_device())
        if local_rank() >= torch.cuda.device_count():
            raise ValueError(f"process LOCAL_RANK={local_rank()} has no GPU of its own ({torch.cuda.device_count()} "
                             f"visible): start at most that many processes per node, or use --device cpu")
        return torch.device("cuda", local_rank())
    return torch.device(name)


def synchronise_batch_norm(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` with every batch-norm layer normalising over the global batch
    (:class:`torch.nn.SyncBatchNorm`, sharing the layers' parameters and running statistics), for
    training in several processes; ``model`` itself when it has no batch norm. Without it each
    process would normalise by its own slice's statistics, so N processes would not train what one
    process with the same --batch-size trains, and DDP would overwrite every process's running
    statistics with rank 0's. ValueError on a device SyncBatchNorm does not run on (the CPU)."""
    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return model
    if device.type != "cuda":
        raise ValueError("this model has batch norm, which several processes can only normalise over the "
                         "global batch on GPUs (SyncBatchNorm): train it in one process on the CPU, or "
                         "with --device cuda")
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)


def init(device: torch.device) -> None:
    """Join the process group if torchrun started us (idempotent; a no-op for a plain run)."""
    if active() or not launched_by_torchrun():
        return
    if not dist.is_available():
        raise RuntimeError("torchrun launched this process but torch.distributed is not available")
    # torch 2.14: torch._dynamo, first imported once a group exists (DDP's constructor imports it),
    # keeps a reference to that group, so destroy_process_group() cannot free it and gloo's worker
    # threads outlive it into interpreter shutdown, where one releasing a finished collective's
    # tensors aborts the process ("terminate called without an active exception"). Imported
    # before the group, it holds none.
    import torch._dynamo  # noqa: F401

    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of ``tensor`` over all ranks (in place, also returned); identity for one process."""
    if world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor.div_(world_size())
    return tensor


def broadcast_floats(values: list[float], device: torch.device, src: int = 0) -> list[float]:
    """Rank ``src``'s ``values`` on every rank."""
    if world_size() == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.broadcast(tensor, src=src)
    return tensor.tolist()


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


def cleanup(finished: bool = False) -> None:
    """Leave the process group. ``finished``: every rank got here normally, so first wait for all
    of them; a rank that tears its gloo pairs down while a peer still talks to it can abort.
    Whatever holds the group (a DistributedDataParallel wrapper) must be gone by now, or the group
    and its threads survive this call (see ``init``)."""
    if not active():
        return
    if finished and world_size() > 1:
        dist.barrier()
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if gloo:
        _wait_for_gloo_threads()


def _wait_for_gloo_threads(timeout_s: float = 2.0) -> None:
    """Give gloo's event loop a moment to end. When a peer has hung up first, the last reference to
    the transport is dropped on that loop's own thread, which cannot join itself and ends a little
    later: still running at interpreter shutdown, it can abort the process (a rare SIGABRT of a
    rank that had finished). Threads are seen by name in /proc (Linux); elsewhere this returns."""
    tasks = Path("/proc/self/task")
    deadline = time.monotonic() + timeout_s
    while tasks.is_dir() and time.monotonic() < deadline:
        names = []
        for task in tasks.iterdir():
            try:
                names.append((task / "comm").read_text())
            except OSError:  # the thread ended while we looked
                pass
        if not any(name.startswith("gloo") for name in names):
            return
        time.sleep(0.005)
