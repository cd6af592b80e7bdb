"""Statistics over a few seeds that scripts/study_report.py reports beside its t intervals: the
failure rate with its exact (Clopper-Pearson) interval, the speedup of an arm against the median
seed of the baseline with a bootstrap interval, and the smallest paired effect a Holm-corrected t
test can detect at n seeds. tests/tools/test_study_report.py checks them against hand values.

Why the median seed: with three seeds one run that ends 0.3 nats high (a spike at the end of
warmup) moves the mean curve of its arm, and a target taken from the baseline's mean curve then
flatters every arm that did not spike; the median seed is what a typical run of the baseline
reaches.
"""
import math

import numpy as np
from scipy import stats

SPEEDUP_RESAMPLES = 2000
SPEEDUP_SEED = 20250101  # fixed: the same runs give the same interval every time


def clopper_pearson(k, n, confidence=0.95):
    """The exact binomial interval (low, high) of K failures in N runs; (None, None) for N = 0."""
    if n <= 0:
        return None, None
    a = 1 - confidence
    low = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return low, high


def rate_text(k, n):
    """"K/N (P%, 95% CI [L%, H%])"."""
    if n <= 0:
        return "-"
    low, high = clopper_pearson(k, n)
    return f"{k}/{n} ({100 * k / n:.0f}%, [{100 * low:.0f}%, {100 * high:.0f}%])"


def tokens_to_target(curve, target):
    """The tokens at which CURVE ([(tokens, loss)]) first reaches TARGET, linear between the
    eval points around the crossing; None if it never does (study_report.tokens_to_target)."""
    prev = None
    for t, loss in curve:
        if loss <= target:
            if prev is None:
                return float(t)
            t0, l0 = prev
            return float(t0 + (l0 - target) * (t - t0) / (l0 - loss))
        prev = (t, loss)
    return None


def median_index(values):
    """The index of the median of VALUES (the lower middle one for an even count)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(values) - 1) // 2]


def median_seed_speedup(base_curves, arm_curves):
    """Against the baseline's median seed (the seed with the median final eval loss): target =
    that seed's final eval loss, reached at its own first crossing; the arm's tokens = the median
    over its seeds of each seed's tokens to that target (a seed that never reaches it counts as
    infinitely many). dict(target, base_tokens, arm_tokens (None: not reached), speedup (0 when
    not reached)); None when the baseline has no curve."""
    base_curves = [c for c in base_curves if c]
    arm_curves = [c for c in arm_curves if c]
    if not base_curves or not arm_curves:
        return None
    med = base_curves[median_index([c[-1][1] for c in base_curves])]
    target = med[-1][1]
    base_tokens = tokens_to_target(med, target)
    reach = [tokens_to_target(c, target) for c in arm_curves]
    arm_tokens = float(np.median([math.inf if x is None else x for x in reach]))
    if not math.isfinite(arm_tokens):
        return {"target": target, "base_tokens": base_tokens, "arm_tokens": None, "speedup": 0.0}
    return {"target": target, "base_tokens": base_tokens, "arm_tokens": arm_tokens,
            "speedup": base_tokens / arm_tokens if arm_tokens > 0 else math.inf}


def bootstrap_speedup(base_curves, arm_curves, resamples=SPEEDUP_RESAMPLES, seed=SPEEDUP_SEED):
    """95% percentile interval (low, high) of median_seed_speedup: the baseline's seeds and the
    arm's seeds each resampled with replacement (the median seed, hence the target, re-chosen
    in every resample); a resample where the arm does not reach the target counts as speedup
    0. (None, None) below 2 seeds on either side."""
    base_curves = [c for c in base_curves if c]
    arm_curves = [c for c in arm_curves if c]
    if len(base_curves) < 2 or len(arm_curves) < 2:
        return None, None
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(resamples):
        b = [base_curves[i] for i in rng.integers(0, len(base_curves), len(base_curves))]
        a = [arm_curves[i] for i in rng.integers(0, len(arm_curves), len(arm_curves))]
        out.append(median_seed_speedup(b, a)["speedup"])
    low, high = np.percentile(out, [2.5, 97.5])
    return float(low), float(high)


def detectable_effect(n, m, alpha=0.05):
    """The smallest |mean paired difference| / SD of the differences that a two-sided paired t
    test on N pairs can call significant at the first step of Holm over M comparisons (level
    alpha / M): t(1 - alpha / (2 M), n - 1) / sqrt(n). None below 2 pairs."""
    if n < 2 or m < 1:
        return None
    return float(stats.t.ppf(1 - alpha / (2 * m), n - 1) / math.sqrt(n))
