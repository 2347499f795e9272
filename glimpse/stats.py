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
