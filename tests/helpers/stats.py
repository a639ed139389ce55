"""A chi-square test of homogeneity for tests that compare sampled distributions (no SciPy)."""

from __future__ import annotations

import math
from collections import Counter

MIN_EXPECTED = 5  # categories expected fewer times in either sample are pooled


def chi2_sf(x: float, dof: int) -> float:
    """P(X >= x) for X ~ chi-square with ``dof`` degrees of freedom: the regularized upper
    incomplete gamma Q(dof/2, x/2), by its series or its continued fraction (Numerical
    Recipes' gammq), to about 1e-12."""
    a, z = dof / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    log_front = -z + a * math.log(z) - math.lgamma(a)
    if z < a + 1:  # series for P, then Q = 1 - P
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= z / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    b = z + 1 - a  # Lentz's continued fraction for Q
    c, d = 1e300, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def homogeneity(a: Counter[str], b: Counter[str]) -> tuple[float, int, float]:
    """Pearson's chi-square test that samples ``a`` and ``b`` come from one distribution:
    (statistic, degrees of freedom, p-value). Categories expected fewer than
    :data:`MIN_EXPECTED` times in either sample are pooled into one."""
    n_a, n_b = sum(a.values()), sum(b.values())
    total = n_a + n_b
    kept, pooled = [], (0, 0)
    for key in sorted(set(a) | set(b)):
        both = a[key] + b[key]
        if min(both * n_a, both * n_b) / total < MIN_EXPECTED:
            pooled = (pooled[0] + a[key], pooled[1] + b[key])
        else:
            kept.append((a[key], b[key]))
    if sum(pooled):
        kept.append(pooled)
    stat = 0.0
    for count_a, count_b in kept:
        both = count_a + count_b
        for count, n in ((count_a, n_a), (count_b, n_b)):
            expected = both * n / total
            stat += (count - expected) ** 2 / expected
    dof = max(1, len(kept) - 1)
    return stat, dof, chi2_sf(stat, dof)
