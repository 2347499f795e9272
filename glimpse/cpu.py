"""How this process computes on the CPU: what every command and training run sets, in one place."""
from __future__ import annotations

import torch


def configure_cpu(threads: int | None = None) -> bool:
    """Use ``threads`` torch threads (None or 0: torch's default) and flush denormal floats to zero;
    returns whether the flush took (``torch.set_flush_denormal``: x86 with SSE3).

    Why the flush: a DRAW filter's row falls off as exp(-d^2 / 2 sigma^2), and far from a narrow
    filter's centre it passes through float32's denormal range (below 1.2e-38) before it reaches
    zero. Some x86 CPUs multiply denormals in microcode: at trained weights DRAW's training step ran
    2.5-3.5 times slower there (docs/speed.md), while the values flushed lie far under the rounding
    of any sum they join. No other family measured there changed speed beyond the noise. The
    setting is the CPU's: it leaves computation on a GPU as it was."""
    if threads:
        torch.set_num_threads(threads)
    return torch.set_flush_denormal(True)


def flushes_denormals() -> bool:
    """Whether this process flushes denormal floats to zero now: 1e-30 x 1e-10 is a denormal."""
    return (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() == 0.0
