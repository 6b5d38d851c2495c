"""Analytic checks of the Layer-by-Layer metrics, augmentation and token path."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import ortho_group

from skloes.metrics import (
    TokenMetricPooling,
    augment_text,
    augmented_views,
    curvature,
    dataset_entropy,
    dime,
    effective_rank,
    infonce,
    intrinsic_dim,
    isotropy,
    layer_similarity,
    lidar,
    prompt_entropy,
    prompt_vectors,
    simplex_volume,
    smooth_rank,
)
from skloes.metrics._augment import QWERTY_NEIGHBOURS


def _flat_rank(n, d, r, seed=0):
    """An n×d matrix with r equal nonzero singular values."""
    rng = np.random.RandomState(seed)
    U = np.linalg.qr(rng.normal(size=(n, r)))[0]
    V = np.linalg.qr(rng.normal(size=(d, r)))[0]
    return 3.0 * U @ V.T


# --------------------------------------------------------------------------
# Import hygiene
# --------------------------------------------------------------------------
def test_metrics_import_without_torch_matplotlib():
    code = (
        "import sys, skloes.metrics, skloes.plotting, skloes.cli; "
        "heavy = ('torch', 'transformers', 'matplotlib'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "sys.exit(len(bad))"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# --------------------------------------------------------------------------
# Matrix entropy and effective rank
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n, d", [(5, 5), (4, 9)])
def test_identity_gram_entropy_is_log_n(n, d):
    P = np.eye(n, d)  # PPᵀ = I_n
    assert dataset_entropy(P, normalization="raw") == pytest.approx(np.log(n))
    assert dataset_entropy(P) == pytest.approx(1.0)
    assert dataset_entropy(P, normalization="logN") == pytest.approx(1.0)
    log_d = dataset_entropy(P, normalization="logD")
    assert log_d == pytest.approx(np.log(n) / np.log(d))
    assert dataset_entropy(P, normalization="logNlogD") == pytest.approx(1 / np.log(d))


def test_rank_one_entropy_zero_and_erank_one():
    P = np.outer(np.arange(1.0, 7.0), np.random.RandomState(0).normal(size=5))
    assert dataset_entropy(P) == 0.0
    assert dataset_entropy(P, alpha=2.0) == pytest.approx(0.0, abs=1e-12)
    assert effective_rank(P) == pytest.approx(1.0)
    assert effective_rank(P, kind="sigma2") == pytest.approx(1.0)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 3.0])
def test_flat_rank_r_spectrum_gives_log_r_for_every_alpha(alpha):
    P = _flat_rank(12, 9, 4)
    assert dataset_entropy(P, alpha=alpha, normalization="raw") == pytest.approx(
        np.log(4), rel=1e-10
    )


def test_clamp_gram_changes_nothing_on_nonnegative_gram():
    P = np.random.RandomState(0).uniform(size=(30, 8))
    assert dataset_entropy(P, clamp_gram=True) == pytest.approx(dataset_entropy(P))
    Q = P - 0.5  # negative Gram entries: the quirk now matters
    assert dataset_entropy(Q, clamp_gram=True) != pytest.approx(dataset_entropy(Q))


def test_erank_sigma2_is_exp_of_raw_dataset_entropy():
    P = np.random.RandomState(1).normal(size=(40, 12)) * np.linspace(0.1, 3, 12)
    raw = dataset_entropy(P, normalization="raw", max_prompts=None)
    assert effective_rank(P, kind="sigma2") == pytest.approx(np.exp(raw), rel=1e-12)
    assert effective_rank(P, kind="sigma") > effective_rank(P, kind="sigma2")


def test_orthonormal_rows_give_both_effective_ranks_m():
    P = ortho_group.rvs(10, random_state=0)[:6]
    assert effective_rank(P) == pytest.approx(6.0)
    assert effective_rank(P, kind="sigma2") == pytest.approx(6.0)


@pytest.mark.parametrize("n, d", [(4000, 20), (20, 600)])
def test_effective_rank_of_isotropic_gaussian_near_min_n_d(n, d):
    P = np.random.RandomState(0).normal(size=(n, d))
    m = min(n, d)
    assert 0.95 * m < effective_rank(P, max_prompts=None) <= m
    assert 0.9 * m < effective_rank(P, kind="sigma2", max_prompts=None) <= m


def test_entropies_invariant_to_rotation_and_scale():
    rng = np.random.RandomState(0)
    P = rng.normal(size=(50, 8)) * np.linspace(0.2, 2, 8)
    R = ortho_group.rvs(8, random_state=1)
    for f in (dataset_entropy, effective_rank):
        ref = f(P)
        assert f(P @ R) == pytest.approx(ref, rel=1e-10)
        assert f(7.5 * P) == pytest.approx(ref, rel=1e-10)
    tokens = [rng.normal(size=(t, 8)) for t in (3, 6, 9)]
    ref = prompt_entropy(tokens)
    assert prompt_entropy([Z @ R for Z in tokens]) == pytest.approx(ref, rel=1e-10)
    assert prompt_entropy([0.01 * Z for Z in tokens]) == pytest.approx(ref, rel=1e-10)


def test_stack_gives_one_value_per_layer():
    H = np.random.RandomState(0).normal(size=(3, 40, 6)) * [[[1.0]], [[2.0]], [[0.5]]]
    H[2, :, 3:] = 0.0
    for f in (dataset_entropy, effective_rank, isotropy, intrinsic_dim):
        out = f(H)
        assert out.shape == (3,)
        np.testing.assert_allclose(out, [f(layer) for layer in H])
    assert dataset_entropy(H)[2] < dataset_entropy(H)[0]


def test_max_prompts_subsample_is_seeded():
    P = np.random.RandomState(0).normal(size=(300, 20)) * np.linspace(0.1, 2, 20)
    a = dataset_entropy(P, max_prompts=50, random_state=3)
    assert a == dataset_entropy(P, max_prompts=50, random_state=3)
    assert a != dataset_entropy(P, max_prompts=None)


# --------------------------------------------------------------------------
# Token level: prompt entropy and curvature
# --------------------------------------------------------------------------
def test_prompt_entropy_of_orthogonal_and_collinear_tokens():
    assert prompt_entropy([np.eye(4, 8)], preprocess=False) == pytest.approx(1.0)
    line = np.outer(np.arange(6.0), [1.0, 2.0, -1.0]) + 5.0
    assert prompt_entropy([line]) == 0.0  # prep: centred rows ±b/|b|, rank 1


def test_prompt_entropy_skips_short_prompts_and_averages():
    long = np.eye(4, 8)
    short = np.ones((1, 8))
    assert prompt_entropy([long, short], preprocess=False) == pytest.approx(1.0)
    half = np.eye(2, 8) @ np.diag([1.0, 1.0, 0, 0, 0, 0, 0, 0])
    both = prompt_entropy([np.eye(4, 8), np.r_[half, half]], preprocess=False)
    assert both == pytest.approx((1.0 + np.log(2) / np.log(4)) / 2)
    with pytest.raises(ValueError, match="fewer than 2 tokens"):
        prompt_entropy([short, short])


def test_curvature_analytic_paths():
    a, b = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, 2.0])
    line = a + np.arange(6.0)[:, None] * b
    zigzag = np.array([a, a + b, a, a + b, a])
    stairs = np.array([[0, 0], [1, 0], [1, 1], [2, 1], [2, 2]], dtype=float)
    assert curvature([line], preprocess=False) == pytest.approx(0.0, abs=1e-12)
    assert curvature([zigzag], preprocess=False) == pytest.approx(np.pi)
    assert curvature([zigzag], preprocess=False, absolute=True) == pytest.approx(0.0)
    assert curvature([stairs], preprocess=False) == pytest.approx(np.pi / 2)
    assert curvature([stairs], preprocess=False, absolute=True) == pytest.approx(
        np.pi / 2
    )
    # preprocessing keeps a straight line straight and a zig-zag a zig-zag
    assert curvature([line]) == pytest.approx(0.0, abs=1e-12)
    assert curvature([zigzag]) == pytest.approx(np.pi)
    mean = curvature([line, zigzag, np.ones((2, 3))], preprocess=False)
    assert mean == pytest.approx(np.pi / 2)  # 2-token prompt skipped
    assert curvature([stairs], preprocess=False, normalization="logD") == (
        pytest.approx(np.pi / 2 / np.log(2))
    )


def test_token_metrics_per_layer_from_layered_prompts():
    rng = np.random.RandomState(0)
    prompts = [rng.normal(size=(3, t, 5)) for t in (4, 7)]
    out = curvature(prompts)
    assert out.shape == (3,)
    for layer in range(3):
        assert out[layer] == pytest.approx(curvature([p[layer] for p in prompts]))
    P = prompt_vectors(prompts)
    assert P.shape == (3, 2, 5)
    np.testing.assert_allclose(P[1], prompt_vectors([p[1] for p in prompts]))


# --------------------------------------------------------------------------
# View metrics: InfoNCE, LiDAR, DiME
# --------------------------------------------------------------------------
def test_infonce_identical_views_high_and_uninformative_views_zero():
    A = ortho_group.rvs(64, random_state=0)[:40]
    assert infonce(A, A) >= 0.99
    same = np.tile(np.random.RandomState(0).normal(size=(1, 5)), (30, 1))
    assert infonce(same, same) == 0.0
    assert infonce(same, same, normalize=False) == pytest.approx(np.log(30))
    rng = np.random.RandomState(0)
    unit = rng.normal(size=(2, 200, 2048))
    unit /= np.linalg.norm(unit, axis=2, keepdims=True)
    assert abs(infonce(unit[0], unit[1][rng.permutation(200)])) < 0.05


def test_infonce_chunking_does_not_change_the_value():
    rng = np.random.RandomState(0)
    A, B = rng.normal(size=(2, 50, 6)) * 0.3
    assert infonce(A, B, chunk_size=7) == pytest.approx(infonce(A, B), rel=1e-12)


def test_lidar_bounded_and_higher_for_invariant_views():
    rng = np.random.RandomState(0)
    centres = rng.normal(size=(60, 6))
    tight = centres + 0.05 * rng.normal(size=(16, 60, 6))
    loose = centres + 3.0 * rng.normal(size=(16, 60, 6))
    for views in (tight, loose):
        assert 0.0 <= lidar(views) <= 1.0
    assert lidar(tight) > lidar(loose)
    assert smooth_rank(tight) == pytest.approx(
        np.exp(lidar(tight, normalization="raw"))
    )
    stacked = np.stack([tight, loose], axis=1)  # (Q, n_layers, M, D)
    np.testing.assert_allclose(lidar(stacked), [lidar(tight), lidar(loose)])


def test_dime_identical_views_beat_shuffled():
    A = np.random.RandomState(0).normal(size=(200, 32))
    shuffled = A[np.random.RandomState(1).permutation(200)]
    same = dime(A, A, random_state=0)
    assert same > 0
    assert abs(dime(A, shuffled, random_state=0)) < 0.2 * same
    assert dime(A, A, random_state=0) == same  # seeded permutations


# --------------------------------------------------------------------------
# Selector quantities and TwoNN
# --------------------------------------------------------------------------
@pytest.mark.parametrize("d0", [2, 3, 4, 5])
def test_twonn_recovers_subspace_dimension(d0):
    rng = np.random.RandomState(d0)
    basis = np.linalg.qr(rng.normal(size=(50, d0)))[0]
    X = rng.uniform(size=(2000, d0)) @ basis.T
    est = intrinsic_dim(X, max_prompts=None)
    assert abs(est - d0) <= 0.15 * d0
    assert intrinsic_dim(X, max_prompts=None, normalization="logN") == (
        pytest.approx(est / np.log(2000))
    )


def test_selector_quantities_match_their_definitions():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(20000, 10))
    assert isotropy(X) >= 0.99
    assert isotropy(X, kind="inv_cv") >= 10
    rank1 = np.outer(rng.normal(size=50), rng.normal(size=4))
    assert isotropy(rank1) == pytest.approx(1 / 4, abs=1e-9)
    A = rng.normal(size=(40, 5))
    sim = layer_similarity(np.stack([A, -3 * A @ ortho_group.rvs(5, random_state=0)]))
    assert sim[0, 1] == pytest.approx(1.0)
    over = layer_similarity(np.stack([A, A]), kind="overlap")
    assert over[0, 0] == pytest.approx(np.linalg.norm(A.T @ A) / np.linalg.norm(A) ** 2)
    tri = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, np.sqrt(3)]])
    X3 = np.repeat(tri, 10, axis=0)
    y3 = np.repeat([0, 1, 2], 10)
    area = simplex_volume(X3, y3)
    assert area == pytest.approx(simplex_volume(5 * X3 + 2, y3), rel=1e-12)
    assert area > 0
    assert simplex_volume(X3, np.repeat([0, 1, 1], 10)) == 0.0


# --------------------------------------------------------------------------
# Augmentation
# --------------------------------------------------------------------------
TEXTS = [
    "An utterly charming film, 10/10!",
    "dull",
    "",
    "Plot holes everywhere in 2024",
]


def test_augmented_views_are_deterministic_and_keep_word_count():
    v1 = augmented_views(TEXTS, n_views=3, random_state=7)
    assert v1 == augmented_views(TEXTS, n_views=3, random_state=7)
    assert v1 != augmented_views(TEXTS, n_views=3, random_state=8)
    for view in v1:
        for text, aug in zip(TEXTS, view, strict=True):
            assert len(aug.split()) >= len(text.split())
    assert v1[0][0] != v1[1][0]  # views differ
    # a pure function of (text, random_state, i, j): other texts do not matter
    assert augmented_views(TEXTS[:1], n_views=3, random_state=7)[2][0] == v1[2][0]
    rs = augmented_views(TEXTS, random_state=np.random.RandomState(0))
    assert rs == augmented_views(TEXTS, random_state=np.random.RandomState(0))


def test_augment_operations_follow_the_spec():
    rng = np.random.default_rng(0)
    text = "Abc9, x Hello"
    sub = augment_text(text, rng, p_split=0.0, p_word=1.0, p_char=1.0, p_typo=0.0)
    assert len(sub) == len(text)
    for old, new in zip(text, sub, strict=True):
        if old.isascii() and old.isalnum() and old != "x":
            assert new != old
            assert (old.islower(), old.isupper(), old.isdigit()) == (
                new.islower(),
                new.isupper(),
                new.isdigit(),
            )
        else:
            assert new == old  # punctuation, spaces and the 1-letter word stay
    typo = augment_text(
        "hello",
        np.random.default_rng(1),
        p_split=0.0,
        p_word=1.0,
        p_char=0.0,
        p_typo=1.0,
    )
    assert all(n in QWERTY_NEIGHBOURS[o] for o, n in zip("hello", typo, strict=True))
    split = augment_text("abcdefgh", np.random.default_rng(2), p_split=1.0, p_word=0.0)
    assert split.replace(" ", "") == "abcdefgh" and len(split.split()) == 2
    assert QWERTY_NEIGHBOURS["s"] == "adwezx"
    assert QWERTY_NEIGHBOURS["q"] == "wa"


def test_user_augmenter_gets_a_generator():
    seen = []

    def shout(text, rng):
        seen.append(rng)
        return text.upper() + "!" * int(rng.integers(1, 3))

    views = augmented_views(["a", "b"], augment=shout, random_state=0)
    assert all(isinstance(r, np.random.Generator) for r in seen) and len(seen) == 4
    assert views[0][0].startswith("A!")
    with pytest.raises(TypeError, match="must return a str"):
        augmented_views(["a"], augment=lambda t, r: 3)
    with pytest.raises(ValueError, match="augment"):
        augmented_views(["a"], augment="fancy")


# --------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dataset_entropy(np.array([[1.0, np.nan], [0, 1]])), "NaN"),
        (lambda: dataset_entropy(np.ones(5)), "shape"),
        (lambda: dataset_entropy(np.ones((1, 4))), "at least 2 samples"),
        (lambda: dataset_entropy(np.eye(3), normalization="log2"), "normalization"),
        (lambda: dataset_entropy(np.eye(3), alpha=0), "alpha"),
        (lambda: dataset_entropy(np.ones((4, 1))), "D >= 2"),
        (lambda: effective_rank(np.eye(3), kind="sigma3"), "kind"),
        (lambda: infonce(np.eye(3), np.eye(4)), "same shape"),
        (lambda: infonce(np.eye(3), np.eye(3), temperature=0), "temperature"),
        (lambda: dime(np.eye(3), np.eye(3), n_permutations=0), "n_permutations"),
        (lambda: lidar(np.ones((1, 5, 3))), "at least 2 views"),
        (lambda: curvature([]), "non-empty"),
        (lambda: curvature([np.ones((3, 2)), np.ones((3, 4))]), "width"),
        (lambda: prompt_entropy([np.ones(3)]), "shape"),
        (lambda: intrinsic_dim(np.ones((10, 3))), "distinct"),
        (lambda: simplex_volume(np.ones((4, 2)), [0, 1]), "one label per sample"),
        (lambda: TokenMetricPooling(metrics=("entropy",)), "metrics"),
    ],
)
def test_bad_input_raises_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------
# The streaming token path through HiddenStatesTransformer
# --------------------------------------------------------------------------
@pytest.mark.torch
def test_token_metric_pooling_matches_plain_arrays(tiny_model_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    from skloes import HiddenStatesTransformer

    texts = [
        "a good movie",
        "the plot is very dull and boring",
        "fun",
        "i was",
        "this film was quite lovely really",
    ]
    token = TokenMetricPooling()
    outs = []
    for batch_size in (1, 4):  # padding must not change anything
        hst = HiddenStatesTransformer(
            tiny_model_path, pooling=token, device="cpu", batch_size=batch_size
        )
        outs.append(hst.fit_transform(texts))
    np.testing.assert_allclose(outs[0], outs[1], atol=1e-5)
    pooled, metrics = token.split(outs[1])
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModel.from_pretrained(tiny_model_path).eval()
    prompts = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, return_tensors="pt")
            states = model(**enc, output_hidden_states=True).hidden_states
            prompts.append(torch.stack(states)[:, 0].double().numpy())
    np.testing.assert_allclose(
        metrics["prompt_entropy"], prompt_entropy(prompts), rtol=1e-4
    )
    np.testing.assert_allclose(metrics["curvature"], curvature(prompts), rtol=1e-4)
    means = np.stack([p.mean(axis=1) for p in prompts], axis=1)
    np.testing.assert_allclose(pooled, means, atol=1e-5)


def test_token_metric_values_ignore_padding_side():
    rng = np.random.RandomState(0)
    lengths = [5, 2, 7, 1]
    prompts = [rng.normal(size=(t, 6)) for t in lengths]
    right = np.zeros((4, 7, 6))
    left = rng.normal(size=(4, 7, 6))  # garbage in the padding must not matter
    mask_r, mask_l = np.zeros((4, 7)), np.zeros((4, 7))
    for b, Z in enumerate(prompts):
        right[b, : len(Z)], mask_r[b, : len(Z)] = Z, 1
        left[b, 7 - len(Z) :], mask_l[b, 7 - len(Z) :] = Z, 1
    token = TokenMetricPooling()
    v_r = token.values(right, mask_r)
    v_l = TokenMetricPooling(chunk_size=3).values(left, mask_l)  # chunked
    np.testing.assert_allclose(v_r, v_l, rtol=1e-12)
    assert np.isnan(v_r[3]).all() and np.isnan(v_r[1, 1]) and not np.isnan(v_r[1, 0])
    for b in (0, 2):
        assert v_r[b, 0] == pytest.approx(prompt_entropy([prompts[b]]))
        assert v_r[b, 1] == pytest.approx(curvature([prompts[b]]))


# --------------------------------------------------------------------------
# The authors' definitions (`definition="authors_code"`), against independent
# re-computations written from the definitions, one prompt and one row at a
# time, with arccos and plain exponentials
# --------------------------------------------------------------------------
def _centred_unit_rows(Z):
    Z = Z - Z.mean(axis=0)
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)


def _authors_curvature_by_hand(prompts):
    per_prompt = []
    for Z in prompts:
        U = _centred_unit_rows(Z)
        angles = [np.arccos(U[k] @ U[k + 1]) for k in range(len(U) - 1)]
        per_prompt.append(np.mean(angles))
    return np.mean(per_prompt)


def _paper_curvature_by_hand(prompts):
    per_prompt = []
    for Z in prompts:
        V = np.diff(_centred_unit_rows(Z), axis=0)
        angles = [
            np.arccos(V[k + 1] @ V[k] / np.linalg.norm(V[k + 1]) / np.linalg.norm(V[k]))
            for k in range(len(V) - 1)
        ]
        per_prompt.append(np.mean(angles))
    return np.mean(per_prompt)


def test_curvature_definitions_equal_their_recomputation():
    rng = np.random.RandomState(0)
    # uneven lengths, a drift so consecutive tokens are correlated, several layers
    prompts = [np.cumsum(rng.normal(size=(3, t, 16)), axis=1) for t in (2, 3, 5, 9, 17)]
    for definition, by_hand, kept in (
        ("authors_code", _authors_curvature_by_hand, prompts),
        ("paper", _paper_curvature_by_hand, prompts[1:]),  # 2 tokens: no angle
    ):
        got = curvature(prompts, definition=definition)
        for layer in range(3):
            want = by_hand([p[layer] for p in kept])
            assert got[layer] == pytest.approx(want, rel=1e-9)
    # the two definitions measure different angles
    assert not np.allclose(
        curvature(prompts, definition="authors_code"), curvature(prompts)
    )


def test_curvature_authors_code_on_known_paths():
    # centred and normalised, two tokens are antipodal: the angle is π
    two = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]])
    assert curvature([two], definition="authors_code") == pytest.approx(np.pi)
    assert np.isnan(
        TokenMetricPooling(definition="paper").values(two[None], [[1, 1]])[0, 1]
    )
    # quarter turns of raw unit tokens: π/2, and logD divides by log D
    turns = np.array([[1.0, 0, 0], [0, 1, 0], [-1, 0, 0], [0, -1, 0]])
    kw = {"definition": "authors_code", "preprocess": False}
    assert curvature([turns], **kw) == pytest.approx(np.pi / 2)
    assert curvature([turns], normalization="logD", **kw) == pytest.approx(
        np.pi / 2 / np.log(3)
    )
    # the same token repeated: angle 0, not NaN
    assert curvature([np.tile(turns[:1], (4, 1))], **kw) == 0.0
    with pytest.raises(ValueError, match="fewer than 2 tokens"):
        curvature([turns[:1]], definition="authors_code")
    with pytest.raises(ValueError, match="`definition` must be one of"):
        curvature([turns], definition="authors")


def test_token_pooling_streams_the_authors_curvature():
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    hidden = rng.normal(size=(3, 6, 5)).astype(np.float32)
    mask = np.array([[1] * 6, [0, 0, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]])
    f = TokenMetricPooling(metrics=("curvature",), definition="authors_code")
    out = f(torch.from_numpy(hidden), torch.from_numpy(mask)).numpy()
    for b in range(3):
        tokens = hidden[b][mask[b].astype(bool)].astype(np.float64)
        want = curvature([tokens], definition="authors_code")
        assert out[b, 5] == pytest.approx(want, rel=1e-5)  # float32 tokens
        assert out[b, 6] == 1.0  # long enough, 2 tokens included
    with pytest.raises(ValueError, match="definition"):
        TokenMetricPooling(definition="steps")


def _nt_xent_by_hand(a, b, tau):
    """The two-view SimCLR loss: mean over the 2M rows of Z = [a; b]."""
    Z = np.concatenate([a, b])
    n, M = len(Z), len(a)
    S = np.exp(Z @ Z.T / tau)
    losses = []
    for r in range(n):
        positive = S[r, (r + M) % n]
        others = S[r].sum() - S[r, r]  # the positive and every negative
        losses.append(-np.log(positive / others))
    return np.mean(losses)


def _infonce_by_hand(a, b, tau):
    S = np.exp(a @ b.T / tau)
    return np.mean([-np.log(S[i, i] / S[i].sum()) for i in range(len(a))])


def test_infonce_definitions_equal_their_recomputation():
    rng = np.random.RandomState(0)
    base = rng.normal(size=(3, 40, 12))
    A = base + 0.3 * rng.normal(size=base.shape)
    B = base + 0.3 * rng.normal(size=base.shape)
    A /= np.linalg.norm(A, axis=2, keepdims=True)  # as prompt vectors: norms <= 1
    B /= np.linalg.norm(B, axis=2, keepdims=True)
    for tau in (0.1, 0.5):
        raw = infonce(A, B, definition="authors_code", temperature=tau, normalize=False)
        one_way = infonce(A, B, temperature=tau, normalize=False)
        for layer in range(3):
            want = _nt_xent_by_hand(A[layer], B[layer], tau)
            assert raw[layer] == pytest.approx(want, rel=1e-9)
            assert one_way[layer] == pytest.approx(
                _infonce_by_hand(A[layer], B[layer], tau), rel=1e-9
            )
        assert not np.allclose(raw, one_way)
    # chunking changes nothing; normalised = 1 - L / log(2M - 1)
    kw = {"definition": "authors_code", "temperature": 0.5}
    chunked = infonce(A, B, chunk_size=7, normalize=False, **kw)
    np.testing.assert_allclose(chunked, raw, rtol=1e-12)
    np.testing.assert_allclose(
        infonce(A, B, **kw), 1 - raw / np.log(2 * 40 - 1), rtol=1e-12
    )


def test_infonce_authors_code_limits_and_no_overflow():
    same = np.tile(np.random.RandomState(0).normal(size=(1, 5)), (30, 1))
    assert infonce(same, same, definition="authors_code") == pytest.approx(0.0)
    assert infonce(
        same, same, definition="authors_code", normalize=False
    ) == pytest.approx(np.log(59))
    A = ortho_group.rvs(64, random_state=0)[:40]
    assert infonce(A, A, definition="authors_code") >= 0.99
    # raw dot products of 1e4 would overflow exp(); log-sum-exp does not
    big = infonce(300 * A, 300 * A, definition="authors_code", normalize=False)
    assert np.isfinite(big) and big == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="`definition` must be one of"):
        infonce(A, A, definition="simclr")


def test_prompt_entropy_clamp_follows_the_authors_gram_when_tokens_outnumber_dims():
    rng = np.random.RandomState(0)
    Z = rng.normal(size=(9, 4))  # N > D: the authors clamp the D×D Gram
    U = _centred_unit_rows(Z)
    lam = np.linalg.eigvalsh(np.maximum(U.T @ U, 0.0))
    p = lam[lam > 1e-12] / lam[lam > 1e-12].sum()
    want = -(p * np.log(p)).sum() / np.log(4)
    assert prompt_entropy([Z], clamp_gram=True) == pytest.approx(want, rel=1e-9)
    assert prompt_entropy([Z], clamp_gram=True) != pytest.approx(
        prompt_entropy([Z], clamp_gram=False), rel=1e-6
    )


def _entropy_by_hand(K):
    lam = np.linalg.eigvalsh(K)
    lam = lam[lam > 0]
    p = lam / lam.sum()
    return -(p * np.log(p)).sum()


def test_dime_authors_code_takes_the_feature_gram_when_prompts_outnumber_dims():
    rng = np.random.RandomState(0)
    base = rng.normal(size=(60, 5))
    A, B = base + 0.2 * rng.normal(size=(2, 60, 5))  # M = 60 > D = 5
    got = dime(A, B, definition="authors_code", random_state=3)
    perms = np.random.RandomState(3)  # the same permutations, of the 5 features
    perms = [perms.permutation(5) for _ in range(10)]
    KA, KB = A.T @ A, B.T @ B
    h_perm = [_entropy_by_hand(KA * KB[p][:, p]) for p in perms]
    want = (np.mean(h_perm) - _entropy_by_hand(KA * KB)) / np.log(5)
    assert got == pytest.approx(want, rel=1e-9)
    assert got != pytest.approx(dime(A, B, random_state=3), rel=1e-3)
    # with M <= D both definitions take the prompt-by-prompt Gram
    assert dime(A[:5], B[:5], definition="authors_code", random_state=0) == (
        dime(A[:5], B[:5], random_state=0)
    )
    with pytest.raises(ValueError, match="`definition` must be one of"):
        dime(A, B, definition="features")
