"""Heads fitted out of core: they stream a layer store in bounded batches.

:class:`StreamingRidgeClassifier` is exact ridge on the standardized fused
layers from one pass that accumulates the Gram matrix (``p x p`` for ``p``
fused features) and the cross products with the targets; it equals
``make_pipeline(StandardScaler(), RidgeClassifier(alpha))`` fitted in memory.
:class:`StreamingLogisticRegression` minimises scikit-learn's L2 logistic
objective with L-BFGS, each evaluation of the loss and its gradient one pass
over the batches; it converges to ``make_pipeline(StandardScaler(),
LogisticRegression(C))``'s solution. Memory is one batch plus the
parameters, whatever the number of rows (see :ref:`scale_heads`).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy import linalg, optimize
from scipy.special import expit, log_expit, logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from skloes.core._contract import FLOAT_DTYPES, validate_layers
from skloes.core._store import READ_ROWS, is_layer_source
from skloes.core._targets import check_classes, check_label_vector
from skloes.utils._docstrings import fill_doc
from skloes.utils._param_validation import Interval, fit_context

_fit_doc = fill_doc(
    FIT="""
        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_features), or a layer store view
            The layers (fused side by side) of the training rows.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : object
            The fitted head."""
)

__all__ = ["StreamingLogisticRegression", "StreamingRidgeClassifier"]


class _Rows:
    """The rows of a stack in memory or of a store view, as fused batches."""

    def __init__(self, stack, batch_size):
        self.stack, self.batch_size = stack, int(batch_size)
        self.n = stack.shape[1]
        self.passes = 0

    def __iter__(self):
        """``(positions, X)``: ``X`` the fused float64 batch."""
        self.passes += 1
        if is_layer_source(self.stack):
            for batch in self.stack.iter_batches(self.batch_size):
                _check_finite(self.stack, batch)
                yield batch.positions, batch.fused(np.float64)
            return
        k, n, d = self.stack.shape
        for start in range(0, n, self.batch_size):
            part = self.stack[:, start : start + self.batch_size]
            fused = np.asarray(part, dtype=np.float64).transpose(1, 0, 2)
            yield np.arange(start, start + part.shape[1]), fused.reshape(-1, k * d)


def _check_finite(view, batch):
    """A NaN or infinity read from a store is an error naming the layer and
    the row (in memory, the input's validation refuses it)."""
    stack = batch.stack
    if np.isfinite(stack.sum(axis=2, dtype=np.float64)).all():
        return  # one reduction: the common case costs one pass
    bad = ~np.isfinite(stack)
    i, j, _ = (int(v[0]) for v in np.nonzero(bad))
    raise ValueError(
        f"LayerStore {str(view.store.path)!r}: layer {int(view.layers[i])} holds a "
        f"non-finite value ({stack[bad][0]}) at row {int(batch.row_ids[j])} "
        f"(row_id; position {int(batch.positions[j])} of the view); a streaming "
        "head needs finite values (re-extract that shard, or select other rows)."
    )


def _store_layers(X):
    """The hidden-state indices of a store view, or None for a stack in
    memory."""
    return [int(l) for l in X.layers] if is_layer_source(X) else None


class _StreamingLinearClassifier(ClassifierMixin, BaseEstimator):
    """What both streaming heads share: input, classes, standardizing, predict."""

    _parameter_constraints: dict = {
        "standardize": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
    }

    def _rows(self, X, y=None, reset=True):
        """The rows of ``X`` (a stack, a flat table or a store view)."""
        kw = dict(reset=reset, dtype=FLOAT_DTYPES, plain="one_layer", lazy=True)
        if reset:
            self.store_layers_ = _store_layers(X)
        else:
            fitted, given = getattr(self, "store_layers_", None), _store_layers(X)
            if fitted is not None and given is not None and given != fitted:
                raise ValueError(
                    f"{type(self).__name__}: fitted on the store layers {fitted}, "
                    f"but X holds layers {given}; predict from a store (or view) "
                    "of the same layers."
                )
        if y is None:
            return _Rows(validate_layers(self, X, **kw), self.batch_size)
        stack, y = validate_layers(self, X, y, **kw)
        return _Rows(stack, self.batch_size), y

    def _fit_rows(self, X, y):
        """The rows and class codes of ``fit``."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        rows, y = self._rows(X, y)
        return rows, self._targets(y)

    def _targets(self, y):
        y = check_label_vector(y, type(self).__name__)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        check_classes(self.classes_, type(self).__name__)
        return codes

    def _moments(self, rows, codes=None, gram=False):
        """One pass: column means and scales (and, with ``gram``, the centred
        Gram and cross products with the one-vs-all targets), accumulated
        around the first batch's means (no cancellation)."""
        acc = None
        for positions, X in rows:
            if acc is None:
                acc = _Accumulator(X.mean(axis=0), X.shape[1], gram)
            Y = None if codes is None else _signs(codes[positions], len(self.classes_))
            acc.add(X, Y)
        return acc.finish()

    def _scaling(self, variance):
        scale = np.sqrt(variance) if self.standardize else np.ones_like(variance)
        return np.where(scale > 0, scale, 1.0)

    def decision_function(self, X):
        """Decision scores: ``X`` fused, standardized and weighted.

        Parameters
        ----------
        X : array-like of shape (n_layers, n_samples, dim) or \
(n_samples, n_features), or a layer store view
            Read in batches of ``batch_size`` rows.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One column for two classes, as in scikit-learn.
        """
        check_is_fitted(self)
        rows = self._rows(X, reset=False)
        out = np.empty((rows.n, self.coef_.shape[0]))
        for positions, batch in rows:
            out[positions] = batch @ self.coef_.T + self.intercept_
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like or layer store view
            As in :meth:`decision_function`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels as given at ``fit``.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _raw_coef(self, W, b, mean, scale):
        """Weights of the standardized features as weights of the raw ones."""
        coef = W / scale[:, None]
        self.coef_ = coef.T
        self.intercept_ = b - mean @ coef
        self.mean_, self.scale_ = mean, scale

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _signs(codes, n_classes):
    """One-vs-all targets in {-1, 1} (one column for two classes)."""
    Y = -np.ones((len(codes), n_classes))
    Y[np.arange(len(codes)), codes] = 1.0
    return Y[:, 1:] if n_classes == 2 else Y


class _Accumulator:
    """Shifted sums of one pass: counts, means, variances, Gram, cross products."""

    def __init__(self, shift, p, gram):
        self.shift, self.n = shift, 0
        self.s1, self.s2 = np.zeros(p), np.zeros(p)
        self.gram = np.zeros((p, p)) if gram else None
        self.sy = self.xy = self.yy = None

    def add(self, X, Y):
        Xc = X - self.shift
        self.n += len(X)
        self.s1 += Xc.sum(axis=0)
        if self.gram is None:
            self.s2 += np.einsum("ij,ij->j", Xc, Xc)
            return
        self.gram += Xc.T @ Xc
        if Y is not None:
            if self.xy is None:
                q = Y.shape[1]
                self.xy, self.sy, self.yy = np.zeros((X.shape[1], q)), np.zeros(q), 0.0
            self.xy += Xc.T @ Y
            self.sy += Y.sum(axis=0)
            self.yy += float(np.sum(Y * Y))

    def finish(self):
        mean_c = self.s1 / self.n
        out = {"n": self.n, "mean": self.shift + mean_c}
        if self.gram is None:
            out["variance"] = np.maximum(self.s2 / self.n - mean_c**2, 0.0)
            return out
        gram = self.gram - self.n * np.outer(mean_c, mean_c)
        out["gram"], out["variance"] = gram, np.maximum(np.diag(gram) / self.n, 0.0)
        if self.xy is not None:
            out["y_mean"] = self.sy / self.n
            out["xy"] = self.xy - np.outer(self.s1, out["y_mean"])
            out["yy"] = self.yy - self.n * float(np.sum(out["y_mean"] ** 2))
        return out


class StreamingRidgeClassifier(_StreamingLinearClassifier):
    """Ridge classifier on standardized fused layers, fitted in one pass.

    The Gram matrix of the fused features and their cross products with the
    one-vs-all targets (in {-1, 1}) are accumulated batch by batch, then
    solved exactly: the result equals
    ``make_pipeline(StandardScaler(), RidgeClassifier(alpha=alpha))`` fitted
    in memory (Hoerl and Kennard, 1970), while memory stays one batch plus
    ``p x p`` float64 numbers for ``p`` fused features (1,536 features: 19
    MB). A layer store (or a view of its labelled rows) is read once.

    Read more in the :ref:`User Guide <scale_heads>`.

    Parameters
    ----------
    alpha : float, default=1.0
        Ridge penalty on the standardized features (when ``alphas`` is None).
    alphas : array-like of float or None, default=None
        Penalties to choose among by generalized cross-validation (Golub,
        Heath and Wahba, 1979), computed exactly from the accumulated Gram's
        eigendecomposition: no further pass over the rows.
    standardize : bool, default=True
        Standardize each fused feature (mean 0, variance 1) before the fit.
    batch_size : int, default=4096
        Rows read and processed at a time.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights of the raw fused features (standardizing folded in).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercepts.
    alpha_ : float
        The penalty used (``alpha``, or the one ``alphas`` chose).
    gcv_ : ndarray of shape (n_alphas,) or None
        The generalized cross-validation error of each of ``alphas``.
    mean_, scale_ : ndarray of shape (n_features,)
        The standardizing statistics.
    n_passes_ : int
        Passes over the rows (1).
    n_layers_in_, dim_in_ : int
        Layout of the input (see :ref:`data_contract`).
    store_layers_ : list of int or None
        The hidden-state indices of the store view it was fitted on (None
        for a stack in memory): a store view of other layers is refused at
        prediction.

    See Also
    --------
    StreamingLogisticRegression : The logistic head, one pass per iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.scale import StreamingRidgeClassifier
    >>> rng = np.random.RandomState(0)
    >>> y = np.arange(200) % 2
    >>> H = rng.normal(size=(3, 200, 4))
    >>> H[1, :, 0] += 3 * y
    >>> StreamingRidgeClassifier(batch_size=64).fit(H, y).score(H, y) > 0.9
    True
    """

    _parameter_constraints: dict = {
        **_StreamingLinearClassifier._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "alphas": ["array-like", None],
    }

    def __init__(
        self, *, alpha=1.0, alphas=None, standardize=True, batch_size=READ_ROWS
    ):
        self.alpha = alpha
        self.alphas = alphas
        self.standardize = standardize
        self.batch_size = batch_size

    @fit_context(prefer_skip_nested_validation=True)
    @_fit_doc
    def fit(self, X, y):
        """Fit on every row of ``X``, streamed once.

        {FIT}
        """
        rows, codes = self._fit_rows(X, y)
        m = self._moments(rows, codes, gram=True)
        scale = self._scaling(m["variance"])
        A = m["gram"] / np.outer(scale, scale)
        B = m["xy"] / scale[:, None]
        if self.alphas is None:
            self.alpha_, self.gcv_ = float(self.alpha), None
            A[np.diag_indices_from(A)] += self.alpha
            try:
                W = linalg.solve(A, B, assume_a="pos")
            except linalg.LinAlgError:
                W = linalg.lstsq(A, B)[0]
        else:
            W = self._gcv_fit(A, B, m)
        self._raw_coef(W, m["y_mean"], m["mean"], scale)
        self.n_passes_ = rows.passes
        return self

    def _gcv_fit(self, A, B, m):
        """The weights at the penalty of least generalized cross-validation
        error, from one eigendecomposition of the standardized Gram."""
        alphas = np.asarray(self.alphas, dtype=np.float64).ravel()
        if alphas.size == 0 or np.any(alphas <= 0) or not np.all(np.isfinite(alphas)):
            raise ValueError(
                f"{type(self).__name__}: `alphas` must hold positive finite "
                f"penalties; got {self.alphas!r}."
            )
        s, V = linalg.eigh(A)
        s = np.clip(s, 0.0, None)
        b2 = (V.T @ B) ** 2
        n = m["n"]
        gcv = np.empty(alphas.size)
        for i, a in enumerate(alphas):
            f = 1.0 / (s + a)
            rss = (
                m["yy"]
                - 2 * np.sum(f[:, None] * b2)
                + np.sum((s * f * f)[:, None] * b2)
            )
            df = 1.0 + np.sum(s * f)  # the intercept, and the ridge's trace
            gcv[i] = n * max(rss, 0.0) / max(n - df, 1e-12) ** 2
        best = int(np.argmin(gcv))
        self.alpha_, self.gcv_ = float(alphas[best]), gcv
        return V @ ((V.T @ B) / (s + alphas[best])[:, None])


class StreamingLogisticRegression(_StreamingLinearClassifier):
    """L2 logistic regression on standardized fused layers, one pass per step.

    Minimises scikit-learn's objective, ``C`` times the summed log-loss plus
    half the squared norm of the weights (the intercepts unpenalized), with
    L-BFGS (Liu and Nocedal, 1989); every evaluation of the loss and its
    gradient is one pass over the rows in batches, so memory stays one batch
    plus the weights whatever the number of rows. Two classes use one weight
    vector (the binomial loss), more the multinomial loss: the solution of
    ``make_pipeline(StandardScaler(), LogisticRegression(C=C))``.

    Read more in the :ref:`User Guide <scale_heads>`.

    Parameters
    ----------
    C : float, default=1.0
        Inverse of the L2 penalty, as in scikit-learn.
    max_iter : int, default=100
        Most L-BFGS iterations (each one or a few passes over the rows).
    tol : float, default=1e-4
        Stop when the largest gradient entry falls below ``tol`` times the
        number of rows (scikit-learn's ``gtol`` on the mean loss).
    standardize : bool, default=True
        Standardize each fused feature before the fit (one more pass).
    batch_size : int, default=4096
        Rows read and processed at a time.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights of the raw fused features.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercepts.
    mean_, scale_ : ndarray of shape (n_features,)
        The standardizing statistics.
    n_iter_ : int
        L-BFGS iterations run.
    n_passes_ : int
        Passes over the rows.
    n_layers_in_, dim_in_ : int
        Layout of the input (see :ref:`data_contract`).
    store_layers_ : list of int or None
        The hidden-state indices of the store view it was fitted on (None
        for a stack in memory): a store view of other layers is refused at
        prediction.

    See Also
    --------
    StreamingRidgeClassifier : Exact ridge in one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from skloes.scale import StreamingLogisticRegression
    >>> rng = np.random.RandomState(0)
    >>> y = np.arange(200) % 2
    >>> H = rng.normal(size=(3, 200, 4))
    >>> H[1, :, 0] += 3 * y
    >>> StreamingLogisticRegression(batch_size=64).fit(H, y).score(H, y) > 0.9
    True
    """

    _parameter_constraints: dict = {
        **_StreamingLinearClassifier._parameter_constraints,
        "C": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self, *, C=1.0, max_iter=100, tol=1e-4, standardize=True, batch_size=READ_ROWS
    ):
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.standardize = standardize
        self.batch_size = batch_size

    @fit_context(prefer_skip_nested_validation=True)
    @_fit_doc
    def fit(self, X, y):
        """Fit on every row of ``X``, one pass per loss evaluation.

        {FIT}
        """
        rows, codes = self._fit_rows(X, y)
        m = self._moments(rows)
        mean, scale = m["mean"], self._scaling(m["variance"])
        q = 1 if len(self.classes_) == 2 else len(self.classes_)
        p = mean.size
        loss = _LogisticLoss(rows, codes, mean, scale, q, self.C)
        result = optimize.minimize(
            loss,
            np.zeros((p + 1) * q),
            jac=True,
            method="L-BFGS-B",
            options={
                "maxiter": self.max_iter,
                "gtol": self.tol * m["n"] * self.C,
                "ftol": 64 * np.finfo(float).eps,
                "maxls": 50,
            },
        )
        if result.status == 1:
            import warnings

            warnings.warn(
                f"StreamingLogisticRegression: L-BFGS stopped at `max_iter`="
                f"{self.max_iter} before converging; consider a larger max_iter.",
                ConvergenceWarning,
                stacklevel=2,
            )
        W, b = loss.unpack(result.x)
        self._raw_coef(W, b, mean, scale)
        self.n_iter_, self.n_passes_ = int(result.nit), rows.passes
        return self

    def predict_proba(self, X):
        """Class probabilities, in the order of ``classes_``.

        Parameters
        ----------
        X : array-like or layer store view
            As in :meth:`decision_function`.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to 1.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1 - p, p])
        return np.exp(scores - logsumexp(scores, axis=1, keepdims=True))


class _LogisticLoss:
    """``C · Σ log-loss + ½‖W‖²`` and its gradient, one pass over the rows."""

    def __init__(self, rows, codes, mean, scale, q, C):
        self.rows, self.codes, self.q, self.C = rows, codes, q, C
        self.mean, self.scale = mean, scale

    def unpack(self, w):
        W = w[: -self.q].reshape(-1, self.q)
        return W, w[-self.q :]

    def __call__(self, w):
        W, b = self.unpack(w)
        loss, gW, gb = 0.0, np.zeros_like(W), np.zeros_like(b)
        for positions, X in self.rows:
            Z = (X - self.mean) / self.scale
            codes = self.codes[positions]
            scores = Z @ W + b
            if self.q == 1:
                t = (codes == 1).astype(float)
                s = scores[:, 0]
                loss -= np.sum(t * log_expit(s) + (1 - t) * log_expit(-s))
                r = (expit(s) - t)[:, None]
            else:
                lse = logsumexp(scores, axis=1)
                loss += np.sum(lse - scores[np.arange(len(codes)), codes])
                r = np.exp(scores - lse[:, None])
                r[np.arange(len(codes)), codes] -= 1.0
            gW += Z.T @ r
            gb += r.sum(axis=0)
        value = self.C * loss + 0.5 * np.sum(W * W)
        grad = np.concatenate([(self.C * gW + W).ravel(), self.C * gb])
        return value, grad
