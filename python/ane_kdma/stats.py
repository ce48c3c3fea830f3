"""Small statistics shared by calibration and validation."""

from __future__ import annotations

import numpy as np


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x (negated: time falls away from the notch) and R²."""
    p = np.polyfit(x, y, 1)
    pred = np.polyval(p, x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return -float(p[0]), r2
