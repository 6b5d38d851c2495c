"""Bad input to every function of skloes.metrics.

New in issue 34 (the section at the end): selection_stability's inputs
(generators, boolean masks, masks mixed with indices, sets, one selection).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import err, ok  # noqa: E402

from skloes import metrics  # noqa: E402


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


# ==========================================================================
# New in issue 34: selection_stability's inputs
# ==========================================================================
STABILITY_CASES = [  # (id, selections, n_layers, outcome)
    ("generator", lambda: ([1, 2] for _ in range(3)), 5, ok(lambda r: r == 1.0)),
    (
        "boolean_masks_as_lists",
        lambda: [[True, False, True], [True, False, True]],
        3,
        ok(lambda r: r == 1.0),
    ),
    (
        "boolean_mask_array",
        lambda: np.array([[True, False, True, False], [True, False, True, False]]),
        4,
        ok(lambda r: r == 1.0),
    ),
    (
        "masks_and_indices_agree",
        lambda: [[1, 3], [False, True, False, True]],
        4,
        ok(lambda r: r == 1.0),
    ),
    ("tuple_of_tuples", lambda: ((0, 1), (0, 1)), 4, ok(lambda r: r == 1.0)),
    (
        "integer_array",
        lambda: np.array([[0, 1], [0, 1]]),
        4,
        ok(lambda r: r == 1.0),
    ),
    (
        "duplicate_picks",
        lambda: [[0, 0, 1], [0, 1]],
        4,
        ok(lambda r: r == 1.0),
    ),
    (
        "every_layer_every_time",
        lambda: [[0, 1, 2, 3], [0, 1, 2, 3]],
        4,
        ok(lambda r: np.isnan(r)),
    ),  # undefined (no variance to correct for chance): NaN, as documented
    (
        "mask_and_index_mixed",
        lambda: [[True, 1], [0, 1]],
        4,
        err(r"selection 0 of `selections` mixes booleans \(a mask\) and layer"),
    ),
    (
        "mask_of_another_length",
        lambda: [[True, False], [True, True]],
        3,
        err(r"a boolean mask in `selections` must have n_layers \(3\) entries"),
    ),
    (
        "mask_array_of_another_width",
        lambda: np.ones((3, 2), bool),
        4,
        err(r"a boolean `selections` must have n_layers \(4\) columns"),
    ),
    ("one_selection", lambda: [[0, 1]], 4, err(r"at least 2 selections; got 1")),
    ("none", lambda: [], 4, err(r"at least 2 selections; got 0")),
    ("index_too_large", lambda: [[0, 9], [1]], 4, err(r"layer indices in \[0, 3\]")),
    ("index_negative", lambda: [[0, -1], [1]], 4, err(r"layer indices in \[0, 3\]")),
    ("float_indices", lambda: [[0.0, 1.0], [1.0]], 4, err(r"layer indices")),
    ("sets", lambda: ({0, 1}, {1, 2}), 4, err(r"selection 0 is \{0, 1\}")),
    ("a_string", lambda: "0123", 4, err(r"`selections` must be a list of selections")),
    ("a_dict", lambda: {"fold": [0]}, 4, err(r"`selections` must be a list")),
    ("n_layers_one", lambda: [[0], [0]], 1, err(r"`n_layers` must be an int >= 2")),
    ("n_layers_float", lambda: [[0], [1]], 4.0, err(r"`n_layers` must be an int")),
]


@pytest.mark.parametrize(
    "make, n_layers, outcome",
    [pytest.param(m, n, o, id=i) for i, m, n, o in STABILITY_CASES],
)
def test_selection_stability_inputs(make, n_layers, outcome):
    outcome.check(lambda: metrics.selection_stability(make(), n_layers))
