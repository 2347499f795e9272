"""Losses. RAM's hybrid loss is where gradient routing is decided, so it is spelled out here."""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F


class HybridLoss(NamedTuple):
    total: torch.Tensor
    classification: torch.Tensor
    reinforce: torch.Tensor
    baseline: torch.Tensor
    advantage: torch.Tensor  # (B, T-1), detached, for logging its variance


def leave_one_out_baseline(reward: torch.Tensor, samples: int) -> torch.Tensor:
    """reward (B * K, ...), the K sampled trajectories of each image next to each other -> the same
    shape: for each sample, the mean reward of the image's other K - 1 samples (Kool, van Hoof and
    Welling 2019, "Buy 4 REINFORCE samples, get a baseline for free"). It does not depend on the
    sample's own trajectory, so the estimator stays unbiased."""
    if samples < 2:
        raise ValueError(f"a leave-one-out baseline needs at least 2 samples per image, got {samples}")
    per_image = reward.reshape(-1, samples, *reward.shape[1:])
    return ((per_image.sum(1, keepdim=True) - per_image) / (samples - 1)).reshape(reward.shape)


def digit_returns(correct: torch.Tensor, per_digit: int, steps: int) -> torch.Tensor:
    """The reward-to-go of each location chosen while reading D digits in turn.

    ``correct`` (B, D): whether each digit's answer was right; ``per_digit``: glimpses per digit;
    ``steps``: T - 1 chosen locations. Returns (B, T - 1): the location chosen after glimpse t is
    looked at in glimpse t + 1, which belongs to digit b = (t + 1) // per_digit; it can change the
    answers to digits b, b + 1, ... (the core state runs on) but not the ones already given, so
    its return is 1 / D for each of those digits that came out right: (1 / D) * sum_{d >= b} correct_d.
    Crediting each location only with what it could affect drops the noise of earlier answers
    from its gradient (REINFORCE's causality argument); the sequence reward credits every
    location with "every digit right".
    """
    n_digits = correct.shape[1]
    to_go = correct.to(torch.float32).flip(1).cumsum(1).flip(1) / n_digits  # (B, D): digits d.. right, shared
    block = (torch.arange(1, steps + 1, device=correct.device) // per_digit).clamp(max=n_digits - 1)
    return to_go[:, block]


def credited_reward(reward: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, per_digit: int, steps: int,
                    kind: str = "sequence") -> torch.Tensor:
    """The reward REINFORCE credits each chosen location with (``--reinforce-reward``): the env's
    ``reward`` (B,) (1 when every digit is right), or with ``kind`` "digits" and several digits
    (``labels`` (B, D), ``logits`` (B, D, 10)) each location's :func:`digit_returns` (B, steps)."""
    if kind == "digits" and labels.dim() == 2:
        return digit_returns(logits.argmax(-1) == labels, per_digit, steps)
    return reward


def hybrid_loss(logits: torch.Tensor, labels: torch.Tensor, reward: torch.Tensor, log_probs: torch.Tensor,
                baselines: torch.Tensor, samples: int = 1) -> HybridLoss:
    """Cross-entropy + REINFORCE with a baseline + the learned baseline's squared error.

    Args:
        logits: (B, C) final-step class scores, or (B, K, C) for K digits read in turn (one
            cross-entropy term each); trained by cross-entropy only.
        labels: (B,) or (B, K) true classes (from the env's ``info``).
        reward: (B,) 1 for a right final label (every digit right), else 0 (from the env), or
            (B, T-1) a return per chosen location (:func:`digit_returns`); no gradient.
        log_probs: (B, T-1) log pi(l_t | s_1:t) of the sampled locations (gradient to the policy).
        baselines: (B, T-1) b_t.
        samples: K; with K > 1 the batch holds K sampled trajectories of each image, next to each
            other, and the advantage's baseline is the mean reward of the image's other samples
            (:func:`leave_one_out_baseline`) instead of b_t; every term is a mean over all B
            trajectories, so each image weighs K / B.
    The advantage R - b_t uses a *detached* baseline, so the policy loss never trains the
    baseline; the baseline learns from its own squared error alone (also when K > 1, where it
    only serves as a learned estimate to log).
    """
    # with K digits the mean over digits (the paper sums log p(y_s): K times this weight against
    # REINFORCE, whose terms are summed over the steps)
    classification = F.cross_entropy(logits.flatten(0, -2), labels.flatten())
    reward = reward.detach().to(log_probs.dtype)
    reward = reward[:, None] if reward.dim() == 1 else reward  # (B, 1) or (B, T-1)
    if samples > 1:
        advantage = (reward - leave_one_out_baseline(reward, samples)).expand_as(log_probs)
    else:
        advantage = reward - baselines.detach()
    reinforce = -(log_probs * advantage).sum(dim=1).mean()
    if baselines.numel():
        baseline = F.mse_loss(baselines, reward.expand_as(baselines))
    else:  # one glimpse: no location is ever chosen, so there is nothing to reinforce or predict
        baseline = baselines.sum()
    total = classification + reinforce + baseline
    return HybridLoss(total, classification, reinforce, baseline, advantage)
