"""One forward pass over a batch of series: TimesFM 2.5's decode, with per-series scaling and padding.

What happens to each series, so that its forecast never depends on what else is in the batch:

1. It is scaled to zero mean and unit standard deviation (its own, over its own points, in float64).
   A series whose spread is below 1e-12 of its level is constant: the model sees zeros and the
   forecast is shifted by the level (its residue around the float64 mean is rounding noise, which
   above ~1e54 would not even fit float32). TimesFM 2.5 is affine-equivariant
   (``f(a·x + b) = a·f(x) + b``), so this changes nothing in exact arithmetic; it keeps float32
   well-conditioned for large magnitudes, and unlike ``ForecastConfig.normalize_inputs`` (whose
   statistics include the padding) it does not depend on how much the series was padded. The
   float64 variance bounds the magnitudes a series may have: see ``protocol.MAX_ABS_VALUE``.
2. It is left-padded with masked zeros to the batch's longest series, rounded up to a whole patch
   (32). Padding patches are masked out of attention and the rotary positions count from the first
   real patch, so the amount of padding does not change the result (within float tolerance). This
   is why a batch of short series costs what short series cost, not ``maxContext``.
3. ``timesfm``'s compiled decode runs (continuous quantile head on, quantile crossing fixed, flip
   invariance as configured; matmuls in bfloat16 under autocast with ``--dtype bfloat16``), the
   output is scaled back, and when the series had no negative value the forecast is clipped at 0
   (TimesFM's ``infer_is_positive``, applied per series).

The output per series is ``horizon × 10``: index 0 the mean, 1…9 the deciles 0.1…0.9; the point
forecast is the median (index 5), as in ``timesfm``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import numpy as np
import torch

from presage_forecaster.loading import LoadedModel
from presage_forecaster.settings import PATCH


class Engine:
    """Runs batches through a loaded model. Not thread-safe: the batcher calls it from one thread."""

    def __init__(self, loaded: LoadedModel, max_horizon: int, dtype: str = "float32") -> None:
        if loaded.model.compiled_decode is None:
            raise ValueError("the model must be compiled before it is served")
        self.loaded = loaded
        self.max_horizon = max_horizon
        self._decode = loaded.model.compiled_decode
        # bfloat16 weights take float32 activations from timesfm's code: autocast runs the matmuls
        # in bfloat16 and leaves the rest (normalisation, running statistics) in float32.
        device = "cuda" if loaded.device.startswith("cuda") else "cpu"
        self._precision: Callable[[], contextlib.AbstractContextManager[object]] = (
            (lambda: torch.autocast(device, dtype=torch.bfloat16)) if dtype == "bfloat16" else contextlib.nullcontext
        )

    def forecast(self, series: Sequence[np.ndarray], horizon: int) -> np.ndarray:
        """``len(series) × horizon × 10`` forecasts of finite, non-empty float series (oldest first),
        each value of magnitude at most ``protocol.MAX_ABS_VALUE``."""
        if not 1 <= horizon <= self.max_horizon:
            raise ValueError(f"horizon {horizon} outside [1, {self.max_horizon}]")
        longest = max(len(s) for s in series)
        context = -(-longest // PATCH) * PATCH
        values = np.zeros((len(series), context), dtype=np.float32)
        masks = np.ones((len(series), context), dtype=bool)
        shift = np.empty(len(series))
        scale = np.empty(len(series))
        non_negative = np.empty(len(series), dtype=bool)
        for i, s in enumerate(series):
            s = np.asarray(s, dtype=np.float64)
            shift[i] = s.mean()
            spread = s.std()
            constant = spread <= 1e-12 * max(1.0, abs(shift[i]))
            scale[i] = 1.0 if constant else spread
            if not constant:  # a constant series stays zeros (see 1. above)
                values[i, context - len(s) :] = (s - shift[i]) / spread
            masks[i, context - len(s) :] = False
            non_negative[i] = s.min() >= 0
        with torch.inference_mode(), self._precision():
            _, full = self._decode(horizon, values, masks)  # float32, len(series) × horizon × 10
        out = full * scale[:, None, None] + shift[:, None, None]  # float64, scale's dtype
        out[non_negative] = np.maximum(out[non_negative], 0.0)
        return out
