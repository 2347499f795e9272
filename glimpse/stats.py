"""Uncertainty of error rates measured on a finite test set, and paired comparisons of two
models on the same canvases. Plain Python: no statistics library is needed for these two."""
from __future__ import annotations

import math

import numpy as np

Z95 = 1.959964  # two-sided 95 % normal quantile


def wilson_interval(errors: float, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval of an error rate: ``errors`` wrong out of ``n`` (fractions).
    Unlike the normal approximation it stays inside [0, 1] and is sound near 0 errors. ``errors``
    may be a mean count (a model scored over several evaluation seeds on the same canvases)."""
    if n < 1 or not 0 <= errors <= n:
        raise ValueError(f"need 0 <= errors <= n and n >= 1, got errors={errors}, n={n}")
    rate = errors / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def format_interval(errors: float, n: int) -> str:
    """The Wilson interval in percent, as the README and reports print it: ``"2.03-2.63"``."""
    lo, hi = wilson_interval(errors, n)
    return f"{100 * lo:.2f}-{100 * hi:.2f}"


def format_p(p: float) -> str:
    """A p-value as the reports print it: two significant digits, three near 0.05 (so that 0.0496 does not
    read "0.05" beside a verdict it passes), "< 1e-6" below (no equals sign)."""
    return "< 1e-6" if p < 1e-6 else f"{p:.3g}" if 0.045 <= p < 0.055 else f"{p:.2g}"


def p_phrase(p: float) -> str:
    """``p`` as it reads in a sentence: "p = 0.03", "p < 1e-6"."""
    text = format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def mcnemar(right_a: np.ndarray, right_b: np.ndarray) -> dict:
    """Exact McNemar test of two models scored on the same canvases (boolean arrays, one entry per
    canvas, True where the model was right).

    Only the discordant canvases carry information: ``only_a`` (A right, B wrong) and ``only_b``.
    Under the hypothesis that neither model is better, each discordant canvas is a fair coin, so
    the two-sided p-value is twice the binomial tail of the smaller count (at most 1)."""
    right_a, right_b = np.asarray(right_a, bool), np.asarray(right_b, bool)
    if right_a.shape != right_b.shape:
        raise ValueError(f"a paired test needs the same canvases: shapes {right_a.shape} and {right_b.shape}")
    only_a = int((right_a & ~right_b).sum())
    only_b = int((right_b & ~right_a).sum())
    n = only_a + only_b
    smaller = min(only_a, only_b)
    if n == 0:
        p = 1.0
    else:  # sum of C(n, i) / 2^n for i <= smaller, in log space (n can be thousands)
        log_terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
                     for i in range(smaller + 1)]
        top = max(log_terms)
        p = min(1.0, 2 * math.exp(top) * sum(math.exp(t - top) for t in log_terms))
    return {"only_a": only_a, "only_b": only_b, "p": p}


def paired_over_seeds(rights_a: list[np.ndarray], rights_b: list[np.ndarray]) -> dict:
    """Exact paired test of two models' runs on the same canvases, several seeds each (seed s of A
    beside seed s of B; ``rights_*`` one boolean array per seed, one entry per canvas).

    The canvas is the unit: seeds read the same canvases, so pooling them as if they were new
    canvases would count each hard canvas once per seed and make p too small. Each canvas's
    difference d = (seeds of A that read it right) - (those of B) is symmetric about 0 when the
    models' runs do not differ, so the two-sided p is the exact sign-flip probability of a total at
    least as far from 0 as sum(d). With one seed this is McNemar's exact test (:func:`mcnemar`).
    ``only_a`` and ``only_b`` count the discordant (canvas, seed) pairs, as pooled tables show them.
    It tests these runs on these canvases; whether another seed would differ, two seeds cannot say."""
    if len(rights_a) != len(rights_b) or not rights_a:
        raise ValueError(f"need the same seeds of both models, got {len(rights_a)} and {len(rights_b)} runs")
    a = np.stack([np.asarray(r, bool) for r in rights_a])
    b = np.stack([np.asarray(r, bool) for r in rights_b])
    if a.shape != b.shape:
        raise ValueError(f"a paired test needs the same canvases: shapes {a.shape} and {b.shape}")
    if len(a) == 1:
        return mcnemar(a[0], b[0])
    d = a.sum(0).astype(np.int64) - b.sum(0).astype(np.int64)
    total = int(d.sum())
    pmf, offset = np.ones(1), 0  # the sign-flip distribution of sum(d), on the integers from -offset
    for magnitude, count in zip(*np.unique(np.abs(d[d != 0]), return_counts=True)):
        count, magnitude = int(count), int(magnitude)
        log_binomial = [math.lgamma(count + 1) - math.lgamma(k + 1) - math.lgamma(count - k + 1) - count * math.log(2)
                        for k in range(count + 1)]
        step = np.zeros(2 * magnitude * count + 1)
        step[::2 * magnitude] = np.exp(log_binomial)  # k flips up: magnitude * (2k - count)
        pmf, offset = np.convolve(pmf, step), offset + magnitude * count
    values = np.arange(len(pmf)) - offset
    p = float(pmf[np.abs(values) >= abs(total)].sum()) if total else 1.0
    return {"only_a": int((a & ~b).sum()), "only_b": int((b & ~a).sum()), "p": min(1.0, p)}


def holm(tests: list[dict]) -> list[dict]:
    """Holm's step-down adjustment of the ``"p"`` of each test (dicts), added as ``"p_holm"``: with
    it, "p_holm < 0.05" holds for the whole family of tests at once (the chance of any false
    claim stays below 5 %), not for one row picked from many."""
    order = sorted(range(len(tests)), key=lambda k: tests[k]["p"])
    running = 0.0
    for rank, k in enumerate(order):  # the rank-th smallest p times (m - rank), kept monotone
        running = max(running, min(1.0, (len(tests) - rank) * tests[k]["p"]))
        tests[k]["p_holm"] = running
    return tests
