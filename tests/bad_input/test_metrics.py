"""Bad input to every function of skloes.metrics.

Outcomes (``tests/_support/outcomes.py``): ``err`` (one line naming what is
wrong), ``warns`` (a warning, then a result), ``ok`` (a correct result).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok  # noqa: E402

from skloes import metrics  # noqa: E402

torch = pytest.importorskip("torch")


def finite(result):
    values = result if isinstance(result, (int, float)) else np.asarray(result, float)
    assert np.all(np.isfinite(values)), values


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
RNG = np.random.RandomState(0)
N, L, D = 24, 4, 3
STACK = RNG.randn(L, N, D)
Y3 = np.arange(N) % 3


def with_value(value, where=(1, 2, 0)):
    X = STACK.copy()
    X[where] = value
    return X


# --------------------------------------------------------------------------
# Metrics: every function of skloes.metrics
# --------------------------------------------------------------------------
M = RNG.randn(30, 6)
VIEWS_A, VIEWS_B = RNG.randn(3, 30, 6), RNG.randn(3, 30, 6)
TOKENS = [RNG.randn(5, 6) for _ in range(8)]
ONE_MATRIX = {
    "dataset_entropy": metrics.dataset_entropy,
    "effective_rank": metrics.effective_rank,
    "isotropy": metrics.isotropy,
    "intrinsic_dim": metrics.intrinsic_dim,
}
MATRIX_CASES = [
    ("empty", np.empty((0, 6)), err(r"sample|`X`|empty")),
    ("one_row", M[:1], err(r"sample|`X`|rows|2")),
    ("one_d", M[0], err(r"`X`|dimension|2D")),
    ("nan", np.where(M > 2, np.nan, M), err(r"NaN")),
    ("inf", np.where(M > 2, np.inf, M), err(r"inf")),
    ("strings", np.full(M.shape, "a"), err(r"`X`.*numeric")),
    ("numeric_strings", M.astype(str), ok(finite)),
    ("huge_scale", M * 1e150, ok(finite)),
    ("tiny_scale", M * 1e-150, ok(finite)),
    ("one_column", M[:, :1], ok(finite)),
    ("wide", RNG.randn(5, 2000), ok(finite)),
]


# dataset_entropy's "maxEntropy" normalisation divides by log(min(N, D)).
MATRIX_EXCEPTIONS = {("dataset_entropy", "one_column"): err("normalization")}


@pytest.mark.parametrize("fn", list(ONE_MATRIX), ids=list(ONE_MATRIX))
@pytest.mark.parametrize(
    "case, X, outcome", [pytest.param(i, X, o, id=i) for i, X, o in MATRIX_CASES]
)
def test_matrix_metrics(fn, case, X, outcome):
    outcome = MATRIX_EXCEPTIONS.get((fn, case), outcome)
    outcome.check(lambda: ONE_MATRIX[fn](X))


METRIC_CASES = [
    ("entropy-alpha_neg", lambda: metrics.dataset_entropy(M, alpha=-1.0), err("alpha")),
    (
        "entropy-normalization",
        lambda: metrics.dataset_entropy(M, normalization="x"),
        err("normalization"),
    ),
    ("entropy-constant", lambda: metrics.dataset_entropy(np.ones((30, 6))), ok(finite)),
    ("erank-kind", lambda: metrics.effective_rank(M, kind="x"), err("kind")),
    (
        "erank-max_prompts_0",
        lambda: metrics.effective_rank(M, max_prompts=0),
        err("max_prompts"),
    ),
    ("isotropy-kind", lambda: metrics.isotropy(M, kind="x"), err("kind")),
    (
        "intrinsic_dim-constant",
        lambda: metrics.intrinsic_dim(np.ones((30, 6))),
        err(r"30 rows, 1 distinct"),
    ),
    (
        "intrinsic_dim-pairs_of_duplicates",
        lambda: metrics.intrinsic_dim(np.repeat(M[:5], 2, axis=0)),
        err(
            r"`X` has 10 rows, 5 distinct, and 0 "
            r"without a duplicate"
        ),
    ),
    (
        "intrinsic_dim-stack_duplicates",
        lambda: metrics.intrinsic_dim(np.stack([M[:10], np.repeat(M[:5], 2, axis=0)])),
        err(r"layer 1 of `X` has 10 rows, 5 distinct"),
    ),
    (
        "layer_similarity-kind",
        lambda: metrics.layer_similarity(STACK, kind="x"),
        err("kind"),
    ),
    (
        "layer_similarity-one_matrix",
        lambda: metrics.layer_similarity(M),
        ok(lambda r: np.allclose(r, 1)),
    ),
    (
        "layer_similarity-nan",
        lambda: metrics.layer_similarity(with_value(np.nan)),
        err(r"NaN"),
    ),
    (
        "layer_similarity-ok",
        lambda: metrics.layer_similarity(STACK),
        ok(lambda r: np.allclose(np.diag(r), 1)),
    ),
    (
        "simplex_volume-y_short",
        lambda: metrics.simplex_volume(M, Y3[:10]),
        err(r"`y`|y"),
    ),
    (
        "simplex_volume-two_classes",
        lambda: metrics.simplex_volume(M, np.arange(30) % 2),
        ok(lambda r: r == 0.0),
    ),  # documented: zero with fewer than 3 classes
    (
        "simplex_volume-nan",
        lambda: metrics.simplex_volume(np.where(M > 2, np.nan, M), np.arange(30) % 3),
        err(r"NaN"),
    ),
    (
        "infonce-shape_mismatch",
        lambda: metrics.infonce(VIEWS_A, VIEWS_B[:, :20]),
        err(r"`A`|`B`|shape"),
    ),
    (
        "infonce-temperature_0",
        lambda: metrics.infonce(VIEWS_A, VIEWS_B, temperature=0),
        err("temperature"),
    ),
    (
        "infonce-nan",
        lambda: metrics.infonce(np.where(VIEWS_A > 2, np.nan, VIEWS_A), VIEWS_B),
        err(r"NaN"),
    ),
    ("lidar-one_view", lambda: metrics.lidar([VIEWS_A]), err(r"views")),
    ("lidar-empty", lambda: metrics.lidar([]), err(r"views")),
    ("smooth_rank-one_view", lambda: metrics.smooth_rank([VIEWS_A]), err(r"views")),
    (
        "dime-n_permutations_0",
        lambda: metrics.dime(VIEWS_A, VIEWS_B, n_permutations=0),
        err("n_permutations"),
    ),
    (
        "dime-inf",
        lambda: metrics.dime(np.where(VIEWS_A > 2, np.inf, VIEWS_A), VIEWS_B),
        err(r"inf"),
    ),
    ("prompt_entropy-empty", lambda: metrics.prompt_entropy([]), err(r"tokens|empty")),
    (
        "prompt_entropy-nan",
        lambda: metrics.prompt_entropy([np.full((4, 6), np.nan)] * 3),
        err(r"NaN"),
    ),
    (
        "prompt_entropy-one_token",
        lambda: metrics.prompt_entropy([RNG.randn(1, 6)] * 4),
        err(r"token"),
    ),
    ("prompt_entropy-ok", lambda: metrics.prompt_entropy(TOKENS), ok(finite)),
    (
        "curvature-two_tokens",
        lambda: metrics.curvature([RNG.randn(2, 6)] * 4),
        err(r"token"),
    ),
    ("curvature-ok", lambda: metrics.curvature(TOKENS), ok(finite)),
    (
        "prompt_vectors-ragged_width",
        lambda: metrics.prompt_vectors([RNG.randn(3, 6), RNG.randn(3, 5)]),
        err(r"tokens|width|dim"),
    ),
    (
        "augmented_views-n_views_0",
        lambda: metrics.augmented_views(["a b"], n_views=0),
        err("n_views"),
    ),
    ("augmented_views-one_text", lambda: metrics.augmented_views("a b"), err("texts")),
    (
        "augmented_views-empty_text",
        lambda: metrics.augmented_views(["", "a"]),
        ok(lambda r: len(r) == 2),
    ),
    (
        "TokenMetricPooling-pooling",
        lambda: metrics.TokenMetricPooling(pooling="x")(
            torch.randn(2, 3, 4), torch.ones(2, 3)
        ),
        err("pooling"),
    ),
]


@pytest.mark.parametrize(
    "run, outcome", [pytest.param(r, o, id=i) for i, r, o in METRIC_CASES]
)
def test_metric_functions(run, outcome):
    outcome.check(run)
