"""Student's t distribution for whole degrees of freedom, with the standard library only (the
rules run next to training, where scipy is not imported).

The upper tail is the closed form of Abramowitz and Stegun 26.7.3-4 (a finite sum in the angle
atan(t / sqrt(dof))); the quantile is found by bisection on it, and cached, because a rule asks
for the same few (probability, dof) pairs again and again.
"""

from __future__ import annotations

import math
from functools import lru_cache


def upper_tail(t: float, dof: int) -> float:
    """P(T > t) for T ~ Student's t with `dof` degrees of freedom."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be 1 or more, got {dof}")
    if t < 0:
        return 1.0 - upper_tail(-t, dof)
    theta = math.atan(t / math.sqrt(dof))
    sin, cos = math.sin(theta), math.cos(theta)
    if dof % 2:  # odd: A = 2/pi (theta + sin (cos + 2/3 cos^3 + ...))
        term, total = cos, cos if dof > 1 else 0.0
        for k in range(3, dof - 1, 2):
            term *= cos * cos * (k - 1) / k
            total += term
        inside = 2.0 / math.pi * (theta + sin * total)
    else:  # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term = total = 1.0
        for k in range(2, dof - 1, 2):
            term *= cos * cos * (k - 1) / k
            total += term
        inside = sin * total
    return max(0.0, (1.0 - inside) / 2.0)


@lru_cache(maxsize=4096)
def upper_quantile(p: float, dof: int) -> float:
    """The t with P(T > t) = p, for 0 < p < 1/2 (accurate to about 1e-10 relative)."""
    if not 0.0 < p < 0.5:
        raise ValueError(f"an upper-tail probability must be in (0, 0.5), got {p}")
    low, high = 0.0, 1.0
    while upper_tail(high, dof) > p:
        low, high = high, high * 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if upper_tail(middle, dof) > p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-10 * high:
            break
    return (low + high) / 2.0
