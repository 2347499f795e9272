"""Intervals and paired tests the report and README quote."""
import math

import numpy as np
import pytest

from glimpse.stats import format_interval, holm, mcnemar, p_phrase, paired_over_seeds, wilson_interval


def test_wilson_interval_known_values_and_bounds():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)  # the textbook value for 0 / 10
    lo, hi = wilson_interval(250, 10_000)
    assert lo < 0.025 < hi and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.025 * 0.975 / 10_000), rel=0.02)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(10, 10)[1] <= 1.0
    assert format_interval(207, 10_000) == "1.81-2.37"
    with pytest.raises(ValueError, match="errors <= n"):
        wilson_interval(11, 10)


def binomial_p(a: int, b: int) -> float:
    n = a + b
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(a, b) + 1)) / 2**n)


@pytest.mark.parametrize("only_a,only_b", [(0, 10), (3, 9), (7, 7), (40, 60), (0, 0)])
def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_canvases(only_a, only_b):
    both = 50
    right_a = np.array([True] * only_a + [False] * only_b + [True] * both + [False] * 5)
    right_b = np.array([False] * only_a + [True] * only_b + [True] * both + [False] * 5)
    result = mcnemar(right_a, right_b)
    assert (result["only_a"], result["only_b"]) == (only_a, only_b)
    assert result["p"] == pytest.approx(binomial_p(only_a, only_b) if only_a + only_b else 1.0, rel=1e-9)
    assert mcnemar(right_b, right_a)["p"] == pytest.approx(result["p"])  # symmetric


def test_mcnemar_handles_thousands_of_discordant_canvases_and_refuses_unpaired_input():
    rng = np.random.default_rng(0)
    right_a, right_b = rng.random(20_000) < 0.9, rng.random(20_000) < 0.9
    result = mcnemar(right_a, right_b)
    assert result["only_a"] + result["only_b"] > 3000
    assert result["p"] == pytest.approx(binomial_p(result["only_a"], result["only_b"]), rel=1e-9)
    assert mcnemar(np.r_[np.ones(300, bool), np.zeros(200, bool)], np.r_[np.zeros(300, bool), np.ones(200, bool)])["p"] < 1e-4
    with pytest.raises(ValueError, match="same canvases"):
        mcnemar(np.ones(3, bool), np.ones(4, bool))


def test_seeds_on_the_same_canvases_are_not_counted_as_new_canvases():
    """Two seeds that read exactly alike carry no more evidence than one: pooled as if they were
    new canvases, McNemar's p would shrink; the canvas-level test keeps it."""
    rng = np.random.default_rng(0)
    a, b = rng.random(2000) < 0.9, rng.random(2000) < 0.88
    one = paired_over_seeds([a], [b])
    assert one == mcnemar(a, b)  # one seed: McNemar's exact test
    twice = paired_over_seeds([a, a], [b, b])
    assert (twice["only_a"], twice["only_b"]) == (2 * one["only_a"], 2 * one["only_b"])  # the pooled counts
    assert twice["p"] == pytest.approx(one["p"]) and mcnemar(np.r_[a, a], np.r_[b, b])["p"] < one["p"]
    with pytest.raises(ValueError, match="same seeds"):
        paired_over_seeds([a, a], [b])


def test_the_sign_flip_test_by_hand():
    """Three canvases, two seeds: differences d = (2, 1, -1), total 2. The 8 sign patterns give
    totals 4, 2, 2, 0, 0, -2, -2, -4: six of them at least 2 away from 0, p = 6/8."""
    a = [np.array([True, True, False]), np.array([True, False, False])]
    b = [np.array([False, False, True]), np.array([False, False, False])]
    assert paired_over_seeds(a, b) == {"only_a": 3, "only_b": 1, "p": pytest.approx(0.75)}
    assert paired_over_seeds([np.ones(4, bool)] * 2, [np.ones(4, bool)] * 2)["p"] == 1.0


def test_the_sign_flip_test_is_the_enumeration_of_every_sign_pattern():
    """Small random cases, two and three seeds: the exact p is the share of the 2^k sign patterns of
    the k non-zero canvas differences whose total lies at least as far from 0 as the observed one."""
    import itertools
    rng = np.random.default_rng(3)
    for _ in range(40):
        seeds, n = int(rng.integers(2, 4)), int(rng.integers(3, 11))
        a = [rng.random(n) < 0.6 for _ in range(seeds)]
        b = [rng.random(n) < 0.5 for _ in range(seeds)]
        d = np.sum(a, 0).astype(int) - np.sum(b, 0).astype(int)
        d = d[d != 0]
        totals = [sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=len(d))]
        expected = np.mean([abs(t) >= abs(d.sum()) for t in totals]) if d.sum() else 1.0
        assert paired_over_seeds(a, b)["p"] == pytest.approx(expected, abs=1e-12)


def test_holm_is_the_step_down_maximum_and_keeps_the_order():
    """p_holm of the j-th smallest p is the running maximum of (m - i) p_(i), i <= j, capped at 1."""
    rng = np.random.default_rng(4)
    for m in (1, 2, 5, 12):
        ps = list(rng.random(m) ** 3)
        ps[0] = ps[-1]  # a tie
        adjusted = [t["p_holm"] for t in holm([{"p": p} for p in ps])]
        ranked = sorted(range(m), key=lambda k: ps[k])
        expected = {}
        for j, k in enumerate(ranked):
            expected[k] = min(1.0, max((m - i) * ps[ranked[i]] for i in range(j + 1)))
        assert adjusted == pytest.approx([expected[k] for k in range(m)])
        assert all(q >= p for q, p in zip(adjusted, ps))
    assert holm([]) == []


def test_a_mean_error_count_over_seeds_gets_an_interval_between_its_neighbours():
    lo, hi = wilson_interval(2.5, 100)
    assert wilson_interval(2, 100)[0] < lo < wilson_interval(3, 100)[0]
    assert wilson_interval(2, 100)[1] < hi < wilson_interval(3, 100)[1]


def test_a_p_value_reads_in_a_sentence():
    assert p_phrase(0.0324) == "p = 0.032" and p_phrase(1e-9) == "p < 1e-6" and p_phrase(1.0) == "p = 1"
    # near 0.05 a third digit keeps the printed p on the side of 0.05 its verdict is on
    assert p_phrase(0.0496) == "p = 0.0496" and p_phrase(0.0504) == "p = 0.0504" and p_phrase(0.061) == "p = 0.061"
