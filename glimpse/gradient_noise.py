"""How noisy the gradient of a model's attention parameters is at fixed weights: REINFORCE
against backpropagation, and REINFORCE's baselines against each other.

Nothing here trains anything; every function leaves the model's weights, ``requires_grad``
flags and ``.grad`` fields as it found them. Each family says which parameters decide where it
looks (``attention_module``); a hard family plays its own episodes (``episodes``).
"""
from __future__ import annotations

import contextlib
import math
import time
from types import SimpleNamespace
from typing import Callable, Iterable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from envs import ClutteredMNISTVectorEnv
from envs.engine import DigitBank, first_locations, make_canvases
from glimpse.losses import credited_reward, hybrid_loss
from glimpse.models import build_model, get_family
from glimpse.models.registry import canvases_to_tensor, declared_options
from glimpse.progress import progress

__all__ = [
    "attention_parameters", "baseline_name", "gradient_estimates", "reinforce_attention_gradient",
    "reinforce_estimator_noise", "reinforce_gradient_fn", "relative_variance", "relative_variance_interval",
    "run_initialisation", "LOCATION_ESTIMATORS", "location_estimator_gradients", "location_estimator_noise", "soft_attention_gradient", "soft_gradient_fn",
    "soft_minibatch", "trace_and_signal", "trace_interval",
]


# ---------------------------------------------------------------------------------------------
# gradient variance at fixed weights
# ---------------------------------------------------------------------------------------------

def gradient_estimates(grad_fn: Callable[[int], torch.Tensor], batches: Iterable[int]) -> torch.Tensor:
    """(n, d) float64: ``grad_fn(i)`` for each i of ``batches`` (say ``range(n)``), each a gradient
    estimate of any shape, flattened. ``grad_fn`` must draw fresh data and noise per i (seeded by
    i) and leave the weights alone. ValueError for fewer than 2: no variance."""
    grads = [grad_fn(i).detach().reshape(-1).to(torch.float64) for i in batches]
    if len(grads) < 2:
        raise ValueError(f"need at least 2 minibatches for a variance, got {len(grads)}")
    return torch.stack(grads)


def trace_and_signal(grads: torch.Tensor) -> tuple[float, float]:
    """From n gradient estimates (n, d): trace(Cov g), the total variance of one estimate (unbiased,
    over n - 1), and ||E g||^2 estimated without bias (||mean||^2 - trace / n; it may come out
    negative when the noise swamps the signal)."""
    trace = float(grads.var(0, unbiased=True).sum())
    return trace, float(grads.mean(0).pow(2).sum()) - trace / grads.shape[0]


def trace_interval(grads: torch.Tensor, n_bootstrap: int = 200, seed: int = 0) -> tuple[float, float]:
    """90 % bootstrap interval of trace(Cov g) over the n estimates (n, d), resampling them.

    A resample's unbiased variance centres on the plug-in variance, (n - 1) / n of the estimate,
    and with many dimensions that shortfall is as large as the interval's half-width; each
    resample's trace is scaled by n / (n - 1), which centres the interval on the estimate."""
    rng = torch.Generator().manual_seed(seed)
    n = grads.shape[0]
    traces = [trace_and_signal(grads[torch.randint(0, n, (n,), generator=rng)])[0] * n / (n - 1)
              for _ in range(n_bootstrap)]
    lo, hi = np.quantile(traces, [0.05, 0.95])
    return float(lo), float(hi)


def relative_variance(grads: torch.Tensor) -> float:
    """trace(Cov g) / ||E g||^2 (see :func:`trace_and_signal`); inf when no signal is resolved."""
    trace, signal = trace_and_signal(grads)
    return trace / signal if signal > 0 else math.inf


def relative_variance_interval(grads: torch.Tensor, n_bootstrap: int = 200, seed: int = 0,
                               level: float = 0.9) -> tuple[float, float]:
    """A ``level`` bootstrap interval of :func:`relative_variance` from n gradient estimates (n, d),
    resampling the estimates. The inverse, signal / trace, is bootstrapped (it stays finite) and
    its interval inverted; the upper end is inf when the signal is not resolved.

    A resample's own unbiased signal centres on the plug-in ||mean||^2, not on the unbiased
    estimate, because resampling adds trace / n of noise to the mean once more; so trace / n is
    subtracted once more in each resample, which centres the interval on the point estimate; the
    resample's trace is scaled by n / (n - 1), as in :func:`trace_interval`."""
    n = grads.shape[0]
    rng = torch.Generator().manual_seed(seed)
    inverse = []
    for _ in range(n_bootstrap):
        trace, signal = trace_and_signal(grads[torch.randint(0, n, (n,), generator=rng)])
        if trace > 0:  # a resample of one repeated minibatch has no spread: it says nothing
            inverse.append(max(signal - trace / n, 0.0) / (trace * n / (n - 1)))
    tail = (1 - level) / 2
    lo_inv, hi_inv = np.quantile(inverse, [tail, 1 - tail]) if inverse else (0.0, 0.0)
    return 1.0 / hi_inv if hi_inv > 0 else math.inf, 1.0 / lo_inv if lo_inv > 0 else math.inf


def attention_parameters(model: nn.Module, arch: str) -> dict[str, nn.Parameter]:
    """The parameters that decide *where* an ``arch`` model looks, by name: its family's
    :meth:`glimpse.models.Family.attention_module` (RAM: the policy's mean head; DRAW: the
    Linear h -> 5 attention parameters; Show-Attend-Tell: the additive attention; the Spatial
    Transformer: its localisation network)."""
    module = get_family(arch).attention_module(model)
    if module is None:
        raise ValueError(f"a {arch} model has no attention parameters")
    return dict(module.named_parameters())


@contextlib.contextmanager
def _requires_grad(params: list[nn.Parameter]) -> Iterator[None]:
    """Temporarily require gradients of ``params``; the flags are restored afterwards."""
    saved = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(True)
        yield
    finally:
        for p, flag in zip(params, saved):
            p.requires_grad_(flag)


def _flat_grad(loss: torch.Tensor, params: list[nn.Parameter], retain_graph: bool = False) -> torch.Tensor:
    """d loss / d params flattened to (d,), via autograd.grad so that no ``.grad`` is touched
    (``retain_graph``: keep the graph for a second gradient from the same forward)."""
    grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=retain_graph)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params)])


def reinforce_attention_gradient(arch: str, model: nn.Module, env, seed: int, indices: np.ndarray | None = None,
                                 samples: int = 1, reward: str = "sequence") -> torch.Tensor:
    """One minibatch's REINFORCE gradient of a hard ``arch`` model's location policy (its mean
    head: :func:`attention_parameters`), flattened (d,).

    Plays ``env.num_envs`` episodes with sampled locations (the family's ``episodes``;
    ``seed`` seeds both the env, hence which digits, clutter and first location, and the
    location noise), then differentiates ``hybrid_loss(...).reinforce`` w.r.t.
    :func:`attention_parameters`. ``samples`` = 1: the advantage is reward - the learned
    (detached) baseline; K > 1: ``env.num_envs / K`` images, each played K times on one canvas
    from one first location, with the leave-one-out baseline (``--reinforce-samples K``).
    ``indices`` fixes the digits instead. Weights are not changed; no ``.grad`` is written.
    ``reward`` is what REINFORCE credits, as ``--reinforce-reward`` (:func:`~glimpse.losses.credited_reward`):
    the env's (1 when every digit is right) or, with several digits, each digit's reward-to-go.
    """
    family = get_family(arch)
    params = list(attention_parameters(model, arch).values())
    generator = torch.Generator().manual_seed(seed)
    if samples > 1:
        if env.num_envs % samples:
            raise ValueError(f"{env.num_envs} episodes cannot hold {samples} samples of every image")
        engine, n = env.unwrapped.engine, env.num_envs // samples
        picked = torch.randint(0, len(engine.bank), (n,), generator=generator) if indices is None else \
            torch.as_tensor(indices)
        batch = engine.sample_canvases(picked, generator)
        first = first_locations(generator, n, engine.task.first_location)
        options = {"images": batch.images.repeat_interleave(samples, 0),
                   "labels": batch.labels.repeat_interleave(samples, 0),
                   "first_location": first.repeat_interleave(samples, 0)}
    else:
        options = None if indices is None else {"indices": np.asarray(indices)}
    with _requires_grad(params):
        rollout = family.episodes(model, env, sample=True, generator=generator, seed=seed, options=options,
                                  samples=samples)
        per_digit = env.unwrapped.engine.task.n_glimpses
        credited = credited_reward(rollout.reward, rollout.logits, rollout.labels, per_digit,
                                   rollout.log_probs.shape[1], reward)
        loss = hybrid_loss(rollout.logits, rollout.labels, credited, rollout.log_probs, rollout.baselines,
                           samples=samples)
        return _flat_grad(loss.reinforce, params)


def baseline_name(samples: int) -> str:
    """The REINFORCE baseline of ``--reinforce-samples`` = ``samples``, as tables name it."""
    return "learned baseline" if samples == 1 else f"leave-one-out baseline, K = {samples}"


def reinforce_estimator_noise(arch: str, model: nn.Module, task: dict, samples: int, n_batches: int,
                              batch_size: int, data_dir: str | None = None, seed: int = 20_000,
                              n_bootstrap: int = 200, show_progress: bool = False, reward: str = "sequence") -> dict:
    """How noisy one REINFORCE estimator of a hard ``arch`` model's location-policy gradient is,
    and what it costs; ``reward`` is what it credits each location with (``--reinforce-reward``:
    measure the one the run trained with).

    ``samples`` = 1: the learned baseline; K > 1: the leave-one-out baseline, each of the
    ``batch_size`` training images played K times (``--reinforce-samples K``). All are unbiased
    for the same gradient, so their noise compares directly. Returns ``trace``, the total variance
    of one minibatch's gradient over ``n_batches`` minibatches (:func:`reinforce_attention_gradient`,
    minibatch i drawn from ``seed + i``), its 90 % bootstrap interval ``trace_interval``, and
    ``seconds_per_batch``, what one minibatch's gradient took here (rollout and backward), so that
    estimators compare at equal wall-clock: trace x seconds. ``show_progress``: a bar over the
    minibatches (for the command line)."""
    env = ClutteredMNISTVectorEnv(batch_size * samples, **{**task, "split": "train", "data_dir": data_dir})
    grad_fn = reinforce_gradient_fn(arch, model, env, seed, samples, reward)
    grad_fn(0)  # warm-up: digits loaded, caches filled (minibatch 0 is drawn again, from its seed)
    start = time.perf_counter()
    batches = progress(range(n_batches), disable=not show_progress, desc=f"K = {samples}", unit="minibatches")
    grads = gradient_estimates(grad_fn, batches)
    seconds = (time.perf_counter() - start) / n_batches
    return {"samples": samples, "trace": trace_and_signal(grads)[0],
            "trace_interval": trace_interval(grads, n_bootstrap, seed), "seconds_per_batch": seconds}


def soft_attention_gradient(model: nn.Module, arch: str, images: torch.Tensor, labels: torch.Tensor,
                            generator: torch.Generator | None = None) -> torch.Tensor:
    """One minibatch's backprop gradient of cross-entropy w.r.t. the soft model's attention
    parameters (:func:`attention_parameters`), flattened (d,), through the family's training
    forward: randomness that forward draws (the reparameterised retina's sampled locations) comes
    from ``generator`` (a fresh unseeded one when None), so the noise measured is the noise trained with.

    images (B, 1, H, W) float in [0, 1]; labels (B,) int64, or (B, K) with K digits. No regulariser is added (SAT's
    doubly stochastic term is off by default). Weights are not changed; no ``.grad`` is written.
    """
    params = list(attention_parameters(model, arch).values())
    generator = generator if generator is not None else torch.Generator(device=images.device)
    with _requires_grad(params):
        outputs = get_family(arch).training_forward(model, images, generator, slice(None), len(images))
        logits = outputs["logits"]  # (B, C), or (B, K, C) with K digits: one term each, as training has them
        loss = F.cross_entropy(logits.flatten(0, -2), labels.flatten())
        return _flat_grad(loss, params)


def soft_minibatch(task: dict, digits, batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A training-like minibatch for soft models: ``batch_size`` digits drawn uniformly from
    ``digits`` (a :class:`envs.data.Digits`) and placed on fresh canvases of ``task``'s recipe,
    all from a CPU generator seeded with ``seed``. Returns images (B, 1, H, W) float32 and labels (B,)."""
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, len(digits), (batch_size,), generator=generator)
    batch = make_canvases(generator, DigitBank.of(digits), indices, int(task["canvas_size"]),
                          int(task["n_clutter"]), bool(task.get("centred_digit", False)), int(task.get("n_digits", 1)))
    return canvases_to_tensor(batch.images), batch.labels


def reinforce_gradient_fn(arch: str, model: nn.Module, env, seed: int = 0, samples: int = 1,
                          reward: str = "sequence") -> Callable[[int], torch.Tensor]:
    """``i -> reinforce_attention_gradient(arch, model, env, seed + i, samples=samples, reward=reward)``,
    for :func:`gradient_estimates`."""
    return lambda i: reinforce_attention_gradient(arch, model, env, seed + i, samples=samples, reward=reward)


NOISE_SEED_OFFSET = 1 << 32  # the training forward's noise: a stream apart from the minibatch's canvases


def soft_gradient_fn(model: nn.Module, arch: str, task: dict, digits, batch_size: int,
                     seed: int = 0) -> Callable[[int], torch.Tensor]:
    """``i -> soft_attention_gradient`` on ``soft_minibatch(task, digits, batch_size, seed + i)``, its
    training forward's own randomness seeded apart from the canvases'."""
    def grad_fn(i: int) -> torch.Tensor:
        images, labels = soft_minibatch(task, digits, batch_size, seed + i)
        generator = torch.Generator(device=images.device).manual_seed(NOISE_SEED_OFFSET + seed + i)
        return soft_attention_gradient(model, arch, images, labels, generator)

    return grad_fn


def run_initialisation(run: dict) -> nn.Module:
    """A run's own initial weights, rebuilt from its checkpoint dict ``run`` (its seed and model
    config), in eval mode, with what its schedule sets at the run's start (a policy's std): where
    the expected attention gradient is clearly non-zero, as the comparisons at initialisation need."""
    torch.manual_seed(run["train_config"]["seed"])
    model = build_model(run["kind"], run["model_config"]).eval()
    # options a run from before them lacks read at their defaults, as the run's resume would
    defaults = {name: option.default for _, options in declared_options() for name, option in options.items()}
    get_family(run["kind"]).schedule(model, SimpleNamespace(**{**defaults, **run["train_config"]}), 0.0)
    return model


# ---------------------------------------------------------------------------------------------
# one policy, one objective, two estimators: a reparameterised model's gradient through its
# drawn locations against the score function (REINFORCE's estimator) at the same weights
# ---------------------------------------------------------------------------------------------

# each estimator's key, and how tables name it; the score function (REINFORCE's), the others' reference, last
LOCATION_ESTIMATORS = {"reparameterised": "reparameterised, exact",
                       "reparameterised, as trained": "reparameterised, as trained",
                       "score function": "score function, leave-one-out"}


def location_estimator_gradients(model: nn.Module, arch: str, images: torch.Tensor, labels: torch.Tensor,
                                 noise_seed: int, samples: int) -> dict[str, torch.Tensor]:
    """Two unbiased estimates (d,) of one gradient, and the one training takes: of the expected
    cross-entropy over the Gaussian locations of an ``arch`` model that draws them
    reparameterised (``Family.reparameterised_locations``: the differentiable retina), w.r.t.
    its attention parameters (:func:`attention_parameters`).

    images (N, 1, H, W) and labels (N,) hold each of N / ``samples`` images ``samples`` times in a
    row; the family's training forward draws the locations from a generator seeded with
    ``noise_seed``, the same draws for every estimate. ``"reparameterised"``: backpropagation of
    the mean cross-entropy through the drawn locations, in the family's exact backward pass
    (``Family.exact_backward``: undamped; a damped gradient is no objective's gradient, and
    REINFORCE's would not estimate it). ``"score function"``: REINFORCE's estimator of the same
    gradient, the locations taken as actions: each trajectory's cross-entropy minus the mean of its
    image's other ``samples`` - 1 (the leave-one-out baseline), times the gradient of the drawn
    locations' log-density (``Family.location_log_prob``). ``"reparameterised, as trained"``: the
    model's own backward pass, the gradient its run trained with (biased where it damps). Weights
    are not changed; no ``.grad`` is written."""
    family = get_family(arch)
    if samples < 2 or len(images) % samples:
        raise ValueError(f"the leave-one-out baseline needs >= 2 samples of each image, dividing {len(images)}")
    if not family.reparameterised_locations(model.config.to_dict()):
        raise ValueError(f"this {arch} model draws no reparameterised locations: there is no second estimator to compare")
    params = list(attention_parameters(model, arch).values())

    def forward() -> dict:
        generator = torch.Generator(device=images.device).manual_seed(noise_seed)
        return family.training_forward(model, images, generator, slice(None), len(images))

    with _requires_grad(params):
        as_trained = _flat_grad(F.cross_entropy(forward()["logits"], labels), params)
        with family.exact_backward(model):
            outputs = forward()
            losses = F.cross_entropy(outputs["logits"], labels, reduction="none")  # (N,)
            reparameterised = _flat_grad(losses.mean(), params, retain_graph=True)
            per_image = losses.detach().view(-1, samples)
            baseline = (per_image.sum(1, keepdim=True) - per_image) / (samples - 1)
            advantage = (per_image - baseline).reshape(-1)  # (N,)
            score = _flat_grad((advantage * family.location_log_prob(model, outputs)).mean(), params)
    return {"reparameterised": reparameterised, "reparameterised, as trained": as_trained, "score function": score}


def location_estimator_noise(model: nn.Module, arch: str, task: dict, digits, samples: int, n_batches: int,
                             batch_size: int, seed: int = 30_000, n_bootstrap: int = 200,
                             show_progress: bool = False) -> dict:
    """:func:`location_estimator_gradients` on ``n_batches`` minibatches of ``batch_size`` training
    images (``soft_minibatch`` from ``seed + i``), each image ``samples`` times with its own draws
    (seeded apart). For each estimator: ``trace`` (total variance of one minibatch's estimate),
    its 90 % bootstrap interval, the relative variance (:func:`relative_variance`) and its
    ``agreement`` with the score function: |mean difference|^2 / (trace of the differences'
    covariance / n_batches), about 1 where both estimate one gradient, growing with a bias."""
    per_estimator: dict[str, list[torch.Tensor]] = {}
    batches = progress(range(n_batches), disable=not show_progress, desc="minibatches", unit="minibatch")
    for i in batches:
        images, labels = soft_minibatch(task, digits, batch_size, seed + i)
        grads = location_estimator_gradients(model, arch, images.repeat_interleave(samples, 0),
                                             labels.repeat_interleave(samples, 0), NOISE_SEED_OFFSET + seed + i, samples)
        for name, grad in grads.items():
            per_estimator.setdefault(name, []).append(grad.double())
    stacked = {name: torch.stack(grads) for name, grads in per_estimator.items()}
    result = {}
    for name, grads in stacked.items():
        difference = grads - stacked["score function"]
        agreement = float(difference.mean(0).pow(2).sum() / (trace_and_signal(difference)[0] / n_batches)) \
            if name != "score function" else math.nan
        result[name] = {"trace": trace_and_signal(grads)[0], "trace_interval": trace_interval(grads, n_bootstrap, seed),
                        "relative_variance": relative_variance(grads), "agreement": agreement}
    return result
