"""How the gradient travels back through DRAW's recurrence, step by step.

DRAW's state chooses where to read, and the read feeds the next state, so backpropagation goes
round that loop once per step. Where the loop amplifies, the gradient reaching the state grows
going back in time; this measures it, at fixed weights, for any share of the attention gradient
let into the state (``attention_into_core``; the forward pass is the same for every share).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from glimpse.models.draw import DRAWClassifier


def state_gradient_norms(model: DRAWClassifier, images: torch.Tensor, labels: torch.Tensor,
                         attention_into_core: float | None = None) -> dict[str, torch.Tensor]:
    """images (B, 1, H, W), labels (B,) -> ``state`` (T,): the norm of dL/dh_t over the batch for
    t = 1..T (the cross-entropy of the batch mean); ``attention`` (T, 5): the norm of dL/draw_t for
    each raw attention parameter (g~X, g~Y, log sigma^2, log delta~, log gamma); ``parameters``
    (): the norm of the whole parameter gradient. ``attention_into_core`` overrides the model's
    for this measurement only; the weights and their ``.grad`` are left as they were."""
    config = model.config
    probe = DRAWClassifier(dataclasses.replace(
        config, attention_into_core=config.attention_into_core if attention_into_core is None else attention_into_core))
    probe.load_state_dict(model.state_dict())
    states, raws = [], []

    def keep_state(_module, _inputs, output):
        output[0].retain_grad()
        states.append(output[0])

    def keep_raw(_module, _inputs, output):
        output.retain_grad()
        raws.append(output)

    probe.cell.register_forward_hook(keep_state)
    probe.attention.register_forward_hook(keep_raw)
    F.cross_entropy(probe(images)["logits"], labels).backward()
    grads = [p.grad.flatten() for p in probe.parameters() if p.grad is not None]
    return {"state": torch.stack([h.grad.norm() for h in states]),
            "attention": torch.stack([r.grad.norm(dim=0) for r in raws]),
            "parameters": torch.cat(grads).norm()}
