"""Throughput, measured the way training and evaluation really run: the env batched or under
gymnasium's sync vectorisation, one optimiser step of a learner (and where its time goes),
batched prediction.

Used by benchmarks/speed.py and the report, so both print numbers of the same code.
"""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from envs import TASKS, ClutteredMNISTVectorEnv
from glimpse.inference import predict_probabilities
from glimpse.training import distributed
from glimpse.training.config import TrainConfig
from glimpse.training.loop import (TRAINING_PHASES, batch_indices, make_learner, make_optimizer, step_seed,
                                   training_step)
from glimpse.cpu import configure_cpu

ENV_ID = "glimpse/ClutteredMNIST60-v1"


def env_steps_per_second(num_envs: int, episodes: int, device: str | torch.device = "cpu", validate: bool = True,
                         data_dir=None, sync: bool = False) -> float:
    """Glimpse-steps/s (one step of one episode = one glimpse) of the batched env on ``device``
    with random actions made on the device beforehand; ``validate``: the value checks a user's env
    makes (a host read per step). ``sync=True`` times gymnasium's SyncVectorEnv of the single env
    instead (numpy, on the CPU). Each episode is reset, stepped to its end, and judged."""
    device = torch.device(device)
    if sync:
        env = gym.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="sync", data_dir=data_dir)
    else:
        env = ClutteredMNISTVectorEnv(num_envs, device=device, validate=validate, data_dir=data_dir,
                                      **TASKS["cluttered60"])
    n_glimpses = TASKS["cluttered60"]["n_glimpses"]
    generator = torch.Generator(device).manual_seed(0)
    actions = [{"location": torch.rand(num_envs, 2, generator=generator, device=device) * 2 - 1,
                "label": torch.randint(0, 10, (num_envs,), generator=generator, device=device)}
               for _ in range(n_glimpses)]
    if sync:
        actions = [{key: value.numpy() for key, value in action.items()} for action in actions]
    env.reset(seed=0)
    _wait_for(device)
    start = time.perf_counter()
    for _ in range(episodes):
        for action in actions:  # T - 1 glimpses, then the judged step
            env.step(action)
        env.step(actions[0])  # the autoreset step (NEXT_STEP) starts new episodes: glimpse 1
    _wait_for(device)
    seconds = time.perf_counter() - start
    env.close()
    return episodes * num_envs * n_glimpses / seconds


def matmul_gflops(device: str | torch.device = "cpu", seconds: float = 1.0) -> float:
    """The machine's rate on matrix products of RAM's size ((128, 256) @ (256, 256), float32) at
    the current thread count: the ceiling a RAM training step is compared with."""
    device = torch.device(device)
    a, b = torch.randn(128, 256, device=device), torch.randn(256, 256, device=device)
    for _ in range(20):
        a @ b
    _wait_for(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(50):
            a @ b
        _wait_for(device)
        count += 50
    return count * 2 * 128 * 256 * 256 / (time.perf_counter() - start) / 1e9


def training_flops_per_image(learner, batch_size: int) -> float:
    """FLOPs of one training step (loss, forward and backward) per image, counted by
    :class:`torch.utils.flop_counter.FlopCounterMode` (matrix products and convolutions)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        loss, _ = learner.loss(batch_indices(0, 0, batch_size, batch_size), step_seed(0, 0))
        loss.backward()
    learner.model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / batch_size


def _wait_for(device: torch.device) -> None:
    """GPU work is asynchronous: a phase ends when its kernels have run, not when they are queued."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PhaseTimer:
    """``training_step``'s ``mark``: seconds spent in each of TRAINING_PHASES since :meth:`start`,
    summed over the steps timed (the device synchronised at each mark)."""

    def __init__(self, device: torch.device):
        self.device, self.spent, self.last = device, dict.fromkeys(TRAINING_PHASES, 0.0), None

    def start(self) -> None:
        self.last = time.perf_counter()

    def __call__(self, phase: str) -> None:
        _wait_for(self.device)
        now = time.perf_counter()
        if self.last is not None:
            self.spent[phase] += now - self.last
        self.last = now


def training_speed(config: TrainConfig, data, steps: int, warmup: int = 2, device: str | torch.device = "cpu",
                   weights: dict[str, torch.Tensor] | None = None):
    """Full training steps (the loop's own :func:`~glimpse.training.loop.training_step`) at
    ``config.batch_size`` on ``device``, after ``warmup`` steps, from fresh weights or from
    ``weights`` (a checkpoint's ``model_state``: a trained model can run at another speed).

    Returns (images/s, milliseconds per step of each of TRAINING_PHASES, the learner). The
    phases: "data + forward" sets the schedules, makes the canvases (or runs the env's episodes)
    on ``device`` and the loss; "backward"; "optimizer" is gradient clipping (when --grad-clip > 0)
    and Adam's step.
    """
    device = torch.device(device)
    learner = make_learner(config, data, device)
    if weights is not None:
        learner.model.load_state_dict(weights)
    optimizer = make_optimizer(learner.model, config.lr)
    n_train = len(data.train)
    schedule = max(1, config.epochs * (n_train // config.batch_size))
    untimed, timer = PhaseTimer(device), PhaseTimer(device)
    for step in range(steps + warmup):
        mark = timer if step >= warmup else untimed
        mark.start()
        training_step(learner, optimizer, config, step, n_train, schedule, mark=mark)
    images_per_second = steps * config.batch_size / sum(timer.spent.values())
    return images_per_second, {phase: 1000 * seconds / steps for phase, seconds in timer.spent.items()}, learner


def parallel_training_speed(config: TrainConfig, data_dir, steps: int, processes: int, warmup: int = 2) -> float:
    """Images/s of ``processes`` CPU processes of one thread each training one model together, as
    ``torchrun --nproc_per_node=N train.py`` does (DistributedDataParallel over gloo, each
    process on its slice of every global batch of ``config.batch_size``): the other way than
    threads to put several cores to work on a model whose matrices are small. Timed from a
    barrier after ``warmup`` steps to a barrier after ``steps`` more (so the slowest process counts)."""
    import socket

    import torch.multiprocessing as mp

    if config.batch_size % processes:
        raise ValueError(f"batch size {config.batch_size} is not divisible by {processes} processes")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    seconds = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_parallel_training_worker, args=(processes, port, config.to_dict(), data_dir, steps, warmup,
                                                        seconds), nprocs=processes, start_method="spawn")
    return steps * config.batch_size / seconds.get()


def _parallel_training_worker(rank: int, world: int, port: int, config: dict, data_dir, steps: int, warmup: int,
                              seconds) -> None:
    import os

    import torch.distributed as dist

    from envs.data import load_mnist

    # the environment torchrun would give each process, so the group is joined and left as train.py does
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    configure_cpu(1)
    distributed.init(torch.device("cpu"))
    finished = False
    try:
        config = TrainConfig.from_dict(config)
        data = load_mnist(data_dir)
        learner = make_learner(config, data, "cpu", rank, world)
        learner.forward = torch.nn.parallel.DistributedDataParallel(learner.model)
        optimizer = make_optimizer(learner.model, config.lr)
        start = 0.0
        for step in range(warmup + steps):
            if step == warmup:
                dist.barrier()
                start = time.perf_counter()
            training_step(learner, optimizer, config, step, len(data.train), max(1, config.epochs * (
                len(data.train) // config.batch_size)))
        dist.barrier()
        if rank == 0:
            seconds.put(time.perf_counter() - start)
        learner.forward, finished = learner.model, True  # DDP holds the group: drop it before leaving
    finally:
        distributed.cleanup(finished)


def eval_images_per_second(arch: str, model, task: dict, images: np.ndarray, batch_size: int = 500) -> float:
    """Images/s of deterministic prediction on (N, H, W) uint8 canvases, on the model's device
    (the probabilities come back to the CPU, which waits for them)."""
    predict_probabilities(arch, model, task, images[:batch_size], batch_size)  # warm-up
    start = time.perf_counter()
    predict_probabilities(arch, model, task, images, batch_size)
    return len(images) / (time.perf_counter() - start)
