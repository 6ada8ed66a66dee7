"""Gaussian-process regression of a performance response, as in Duplyakin's thesis Ch6 §6.3-6.5.

The model (scikit-learn's ``GaussianProcessRegressor``):

- kernel ``sigma_f^2 * RBF(l) + WhiteKernel(sigma_n^2)`` (eqs. 6.7, 6.11). The length scale
  is one scalar for all features by default (isotropic): Ch7 §7.4 scales the features to the
  unit cube precisely so that one length scale serves them all, at about a third of the fitting
  cost of one length scale per feature (``isotropic=False``, also available);
- the hyperparameters maximise the log marginal likelihood (LML), with ``restarts`` extra
  starts from random points. The thesis writes "minimized" (eqs. 6.12-6.13, 7.8-7.9); the LML is
  a log likelihood and is maximised, as scikit-learn does and as §6.5.2.1 itself says
  ("gradient ascent on the LML");
- the noise is bounded below (§6.5.2.4). **Ambiguity:** the thesis writes the bound on the
  standard deviation ("sigma_n >= 10^-1", Fig. 6.4's axis is sigma_n) but fitted with
  scikit-learn, whose WhiteKernel parameter ``noise_level`` is the *variance* sigma_n^2 (eq.
  6.7), and it does not say which of the two it bounded; bounding ``noise_level`` at 0.1 would
  mean sigma_n >= 0.316. We bound the standard deviation, as written: ``noise_level >=
  min_noise**2`` (sigma_n >= 0.1, about 10% run-to-run noise on a natural-log response).
  ``noise_bound="variance"`` applies ``min_noise`` to sigma_n^2 instead, the other reading;
- the response is log-transformed, and so are the features named in ``log_features`` (the
  problem size); categorical features are one-hot encoded;
- features are scaled to the unit cube over the *candidate space* (all configurations that may
  be chosen), not over the training points, so the scaling does not move as points are added.

Refitting after each new point may start from the previous fit's hyperparameters
(``fit(..., warm=True)``): the optimiser then starts where the last one ended, and the random
restarts can be spent only every few steps; or keep the hyperparameters for a step and only
condition on the new point (``optimize=False``). The thesis (§7.4) names "the number of
retries in the fit optimizer" as the knob for the cost of repeated fitting; the offline replay
(``elastic.learn.evaluate.Settings``) says how often each is done.

Predictions are in log space: ``mu`` is the predicted log response, ``sigma`` its standard
deviation (of the latent function, without the noise, as the thesis's sigma_f(x)).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel, WhiteKernel
from threadpoolctl import threadpool_limits

from elastic.errors import InputError

Array = NDArray[np.float64]


def single_threaded_blas() -> threadpool_limits:
    """BLAS on one thread for the duration of a ``with`` block.

    The matrices here are small (hundreds of points): a multithreaded BLAS spends more on
    its threads than on the arithmetic, and on a busy machine it is several times slower
    (measured: 40 replay steps in 25 s with OpenBLAS's threads, 4 s with one).
    """
    return threadpool_limits(limits=1, user_api="blas")


@dataclass
class Features:
    """Turns dataset rows into points of the unit cube, fixed by the candidate space."""

    columns: Sequence[str]
    log_columns: Sequence[str] = ("size",)
    categories: dict[str, list[str]] = field(default_factory=dict)
    low: Array = field(default_factory=lambda: np.zeros(0))
    high: Array = field(default_factory=lambda: np.ones(0))

    @classmethod
    def fit(
        cls, space: pd.DataFrame, columns: Sequence[str], log_columns: Sequence[str] = ("size",)
    ) -> Features:
        missing = [c for c in columns if c not in space.columns]
        if missing:
            raise InputError(f"feature {missing[0]!r} is not a column of the dataset")
        # A factor with one level carries no information and would divide by zero.
        used = [c for c in columns if space[c].nunique(dropna=True) > 1]
        if not used:
            raise InputError(f"none of the features {list(columns)} varies in the data")
        categories = {
            c: sorted(str(v) for v in space[c].dropna().unique())
            for c in used
            if not pd.api.types.is_numeric_dtype(space[c])
        }
        feats = cls(used, tuple(c for c in log_columns if c in used), categories)
        raw = feats._raw(space)
        feats.low, feats.high = raw.min(axis=0), raw.max(axis=0)
        return feats

    def _raw(self, frame: pd.DataFrame) -> Array:
        parts: list[Array] = []
        for column in self.columns:
            if column in self.categories:
                values = frame[column].astype(str).to_numpy()
                for level in self.categories[column]:
                    parts.append((values == level).astype(float))
            else:
                numbers = frame[column].to_numpy(dtype=float)
                if column in self.log_columns:
                    if np.any(numbers <= 0):
                        raise InputError(f"feature {column!r} must be positive to take its log")
                    numbers = np.log(numbers)
                parts.append(numbers)
        return np.column_stack(parts).astype(float)

    def transform(self, frame: pd.DataFrame) -> Array:
        raw = self._raw(frame)
        span = np.where(self.high > self.low, self.high - self.low, 1.0)
        return np.asarray((raw - self.low) / span, dtype=float)

    @property
    def dimensions(self) -> int:
        return len(self.low)


@dataclass
class Model:
    """A fitted GP on log responses. ``fit`` again to refit from scratch."""

    min_noise: float = 0.1
    restarts: int = 3
    seed: int = 0
    isotropic: bool = True
    noise_bound: str = "sd"  # "sd": sigma_n >= min_noise; "variance": sigma_n^2 >= min_noise
    _gp: GaussianProcessRegressor | None = None
    _offset: float = 0.0

    def kernel(self, dimensions: int) -> Kernel:
        if self.noise_bound not in ("sd", "variance"):
            raise InputError(f"noise_bound must be 'sd' or 'variance', not {self.noise_bound!r}")
        noise_floor = self.min_noise**2 if self.noise_bound == "sd" else self.min_noise
        scale: float | Array = 0.5 if self.isotropic else np.full(dimensions, 0.5)
        return ConstantKernel(1.0, (1e-3, 1e3)) * RBF(
            length_scale=scale, length_scale_bounds=(1e-2, 1e2)
        ) + WhiteKernel(noise_level=max(noise_floor, 0.05), noise_level_bounds=(noise_floor, 1e1))

    def fit(
        self,
        x: Array,
        log_y: Array,
        *,
        warm: bool = False,
        restarts: int | None = None,
        optimize: bool = True,
    ) -> Model:
        """Fit the hyperparameters to (x, log_y) by maximising the LML.

        ``warm`` starts the optimiser from the previous fit's hyperparameters (same bounds);
        ``restarts`` overrides the number of extra random starts for this fit.
        ``optimize=False`` keeps the previous fit's hyperparameters and only conditions the GP
        on the new data (a Cholesky factorisation, no LML search).
        """
        if len(x) == 0:
            raise InputError("cannot fit a model on no data")
        # Centre the log response so the zero-mean prior sits in the data; keep its scale, so
        # the noise bound is in log units of the response.
        self._offset = float(np.mean(log_y))
        keep = (warm or not optimize) and self._gp is not None
        start = self._gp.kernel_ if keep and self._gp is not None else self.kernel(x.shape[1])
        gp = GaussianProcessRegressor(
            kernel=start,
            n_restarts_optimizer=self.restarts if restarts is None else restarts,
            normalize_y=False,
            random_state=self.seed,
            optimizer="fmin_l_bfgs_b" if optimize or self._gp is None else None,
        )
        with warnings.catch_warnings(), single_threaded_blas():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x, log_y - self._offset)
        self._gp = gp
        return self

    def predict(self, x: Array) -> tuple[Array, Array]:
        """(mu, sigma) of the latent log response at ``x`` (sigma excludes the noise term)."""
        if self._gp is None:
            raise InputError("the model is not fitted")
        with single_threaded_blas():
            mean, cov_std = self._gp.predict(x, return_std=True)
        # return_std includes the WhiteKernel's noise: remove it to get sigma of f(x).
        noise = float(self.noise_variance)
        var = np.maximum(np.asarray(cov_std, dtype=float) ** 2 - noise, 1e-12)
        return np.asarray(mean, dtype=float) + self._offset, np.sqrt(var)

    @property
    def noise_variance(self) -> float:
        if self._gp is None:
            return 0.0
        params = self._gp.kernel_.get_params()
        return float(params.get("k2__noise_level", 0.0))

    @property
    def log_marginal_likelihood(self) -> float:
        if self._gp is None:
            raise InputError("the model is not fitted")
        return float(self._gp.log_marginal_likelihood_value_)

    @property
    def kernel_description(self) -> str:
        return str(self._gp.kernel_) if self._gp is not None else ""
