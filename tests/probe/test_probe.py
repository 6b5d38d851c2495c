"""The probe estimators and pruning a fitted pipeline (saving: test_persistence.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _support.texts import NEW, TEXTS, Y

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.probes import blocks_run, first_layers  # noqa: E402
from _support.rounding import (  # noqa: E402
    assert_equal_up_to_rounding,
    assert_same_states,
    equal_up_to_rounding,
    forward_terms,
    head_scale,
)
from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skloes.extraction import HiddenStatesTransformer as HST  # noqa: E402
from skloes.probe import (  # noqa: E402
    LayerEnsembleClassifier,
    LayerProbeClassifier,
    LayerProbeRegressor,
    SelectedLayerConcatenation,
    load_probe,
    prune_layers,
    save_probe,
)
from skloes.selection import (  # noqa: E402
    LastKSelector,
    LOESSelector,
)


@pytest.fixture(scope="module")
def tiny_llama(tiny_models):
    return tiny_models("llama", num_hidden_layers=4)


def _head(fusion, dim, random_state=0):
    """The final step a probe of ``fusion`` fits after the fused layers (of
    width ``dim`` each: the scaler's output declares no layout)."""
    head = LogisticRegression(C=0.01, max_iter=1000)
    if fusion == "concatenate":
        return head
    return LayerEnsembleClassifier(
        head, combine=fusion, layer_dim=dim, random_state=random_state
    )


FUSIONS = ("concatenate", "average", "stack")


# ------------------------------------------------------------------- probe
@pytest.mark.parametrize("fusion", FUSIONS)
def test_probe_fits_predicts_and_uses_only_its_layers(deep_tiny, fusion):
    probe = LayerProbeClassifier(deep_tiny, fusion=fusion, random_state=0)
    probe.fit(TEXTS, Y)
    assert probe.selected_layers_.size == 4
    np.testing.assert_array_equal(probe.classes_, [0, 1])
    np.testing.assert_array_equal(probe.pipeline_[0].layers_, probe.selected_layers_)
    proba = probe.predict_proba(NEW)
    assert proba.shape == (4, 2) and np.allclose(proba.sum(axis=1), 1)
    np.testing.assert_array_equal(probe.predict(NEW), probe.classes_[proba.argmax(1)])
    if fusion == "concatenate":
        assert probe.decision_function(NEW).shape == (4,)
    else:  # one probe per selected layer, combined
        # decision scores: the stack's meta model has them, an average none
        assert hasattr(probe, "decision_function") == (fusion == "stack")
        assert len(probe.estimator_.estimators_) == 4
        assert (probe.estimator_.final_estimator_ is None) == (fusion == "average")
    assert 0.0 <= probe.score(TEXTS, Y) <= 1.0


@pytest.mark.parametrize("fusion", FUSIONS)
def test_probe_predicts_what_the_full_pipeline_predicts(deep_tiny, fusion):
    probe = LayerProbeClassifier(deep_tiny, fusion=fusion, random_state=0)
    probe.fit(TEXTS, Y)
    full = make_pipeline(
        HST(deep_tiny, max_length=128),
        LOESSelector(random_state=0),
        StandardScaler(),
        _head(fusion, probe.pipeline_[0].dim_),
    ).fit(TEXTS, Y)
    np.testing.assert_array_equal(full[1].selected_layers_, probe.selected_layers_)
    np.testing.assert_allclose(
        probe.predict_proba(NEW), full.predict_proba(NEW), atol=1e-6
    )


def test_probe_predict_runs_only_through_the_deepest_selected_block(deep_tiny):
    probe = LayerProbeClassifier(deep_tiny, selector=first_layers(2)).fit(TEXTS, Y)
    np.testing.assert_array_equal(probe.selected_layers_, [1, 2])
    full = blocks_run(lambda: HST(deep_tiny).fit(NEW).transform(NEW))
    pruned = blocks_run(lambda: probe.predict(NEW))
    assert full == 6 and pruned == 2  # one batch: blocks 1..2 of 6


def test_regressor_probe(deep_tiny):
    y = np.arange(len(TEXTS), dtype=float) % 5
    probe = LayerProbeRegressor(deep_tiny, selector=first_layers(2)).fit(TEXTS, y)
    assert probe.predict(NEW).shape == (4,)
    assert np.isfinite(probe.score(TEXTS, y))
    with pytest.raises(ValueError, match="`y` must be finite"):
        LayerProbeRegressor(deep_tiny).fit(TEXTS, np.full(len(TEXTS), np.nan))


def test_nested_parameters_of_the_default_selector_and_estimator(deep_tiny):
    probe = LayerProbeClassifier(deep_tiny)
    probe.set_params(selector__n_layers_to_select=2, estimator__C=0.5)
    assert isinstance(probe.selector, LOESSelector)
    assert probe.selector.n_layers_to_select == 2 and probe.estimator.C == 0.5
    clone(probe)  # still a valid configuration
    with pytest.raises(ValueError, match="Invalid parameter"):
        LayerProbeClassifier().set_params(estimator__no_such=1)


def test_grid_search_with_a_cache_runs_each_text_once(deep_tiny, tmp_path):
    bert_calls = [0]

    def hook(module, inputs, output):
        if type(module).__name__ == "BertEmbeddings":
            bert_calls[0] += output.shape[0]

    probe = LayerProbeClassifier(deep_tiny, cache=tmp_path / "cache", random_state=0)
    search = GridSearchCV(
        probe,
        {"selector__n_layers_to_select": [1, 2, 4], "estimator__C": [0.1, 1.0]},
        cv=3,
    )
    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        search.fit(TEXTS, Y)
    finally:
        handle.remove()
    assert bert_calls[0] == len(set(TEXTS))
    assert (
        search.best_estimator_.selected_layers_.size
        == search.best_params_["selector__n_layers_to_select"]
    )


def test_probe_rejects_bad_parameters_and_targets(deep_tiny):
    with pytest.raises(ValueError, match="at least two classes"):
        LayerProbeClassifier(deep_tiny).fit(TEXTS, np.zeros(len(TEXTS)))
    with pytest.raises(ValueError, match="selector"):
        LayerProbeClassifier(deep_tiny, selector=LogisticRegression()).fit(TEXTS, Y)
    with pytest.raises(ValueError, match="max_length"):
        LayerProbeClassifier(deep_tiny, max_length=0).fit(TEXTS, Y)
    with pytest.raises(TypeError, match="strings"):
        LayerProbeClassifier(deep_tiny).fit(np.zeros((len(Y), 3)), Y)


# deep_tiny: 6 blocks of MLP width 16 after the embeddings
DEEP_TERMS = forward_terms(16, 7)


@pytest.mark.cpu_sensitive
def test_probe_contract_on_text(deep_tiny):
    probe = LayerProbeClassifier(deep_tiny, random_state=0)
    params = probe.get_params()
    assert probe.fit(TEXTS, Y) is probe
    assert probe.get_params() == params  # fit overwrites no parameter
    first = probe.predict_proba(NEW)
    # exact: the same fit, and NEW in the same batch
    np.testing.assert_array_equal(probe.fit(TEXTS, Y).predict_proba(NEW), first)
    # Another order or a subset is another batch: the states move by float32
    # rounding, the probabilities by at most that through the head.
    order = [3, 0, 2, 1]
    states = probe.pipeline_[0].transform(NEW)
    assert_same_states(
        probe.pipeline_[0].transform([NEW[i] for i in order]),
        states[:, order],
        terms=DEEP_TERMS,
    )
    scaler, head = probe.pipeline_[-1]
    fused = probe.pipeline_[:2].transform(NEW)
    scale = head_scale(
        head.coef_, fused, feature_scale=scaler.scale_, probabilities=True
    )
    for got, want in (
        (probe.predict_proba([NEW[i] for i in order]), first[order]),
        (probe.predict_proba(NEW[:2]), first[:2]),
    ):
        assert_equal_up_to_rounding(got, want, terms=DEEP_TERMS, scale=scale)
    # far tighter than the gap between two texts' probabilities
    assert not equal_up_to_rounding(first[order], first, terms=DEEP_TERMS, scale=scale)
    import pickle

    back = pickle.loads(pickle.dumps(probe))
    np.testing.assert_array_equal(back.predict_proba(NEW), first)


# ------------------------------------------------------------------ pruning
@pytest.mark.parametrize("scaling", [None, "layer"])
def test_pruned_pipeline_equals_the_full_one_on_an_encoder(deep_tiny, scaling):
    full = make_pipeline(
        HST(deep_tiny, output="flat"),
        LOESSelector(n_layers_to_select=2, fusion_scaling=scaling, random_state=0),
        StandardScaler(),
        LogisticRegression(),
    ).fit(TEXTS, Y)
    pruned = prune_layers(full)
    assert isinstance(pruned[1], SelectedLayerConcatenation)
    np.testing.assert_array_equal(pruned[0].layers_, full[1].selected_layers_)
    np.testing.assert_allclose(
        pruned.predict_proba(NEW), full.predict_proba(NEW), atol=1e-6
    )
    assert full[0].layers == "all"  # the original is left as it was


@pytest.mark.parametrize("padding", ["right", "left"])
def test_pruned_pipeline_equals_the_full_one_on_a_decoder(tiny_llama, padding):
    full = make_pipeline(HST(tiny_llama), first_layers(2, 5), Ridge()).fit(
        TEXTS, Y.astype(float)
    )
    tokenizer = full[0].processor_
    tokenizer.padding_side = padding
    pruned = prune_layers(full)
    pruned[0].processor_.padding_side = padding
    np.testing.assert_allclose(pruned.predict(NEW), full.predict(NEW), atol=1e-6)
    assert blocks_run(lambda: pruned.predict(NEW)) == 2


def test_pruning_keeps_a_subset_extractor_consistent(deep_tiny):
    """The selector indexes the extractor's output, not hidden-state numbers."""
    full = make_pipeline(
        HST(deep_tiny, layers=[2, 4, 6]),
        LastKSelector(n_layers_to_select=1),
        LogisticRegression(),
    ).fit(TEXTS, Y)
    pruned = prune_layers(full)
    np.testing.assert_array_equal(pruned[0].layers_, [6])
    np.testing.assert_allclose(
        pruned.predict_proba(NEW), full.predict_proba(NEW), atol=1e-6
    )


def test_prune_layers_refuses_what_it_cannot_prune(deep_tiny):
    with pytest.raises(TypeError, match="fitted Pipeline"):
        prune_layers(LOESSelector())
    with pytest.raises(TypeError, match="HiddenStatesTransformer"):
        prune_layers(make_pipeline(StandardScaler(), LOESSelector()))
    with pytest.raises(TypeError, match="layer selector"):
        prune_layers(make_pipeline(HST(deep_tiny), StandardScaler()))
    with pytest.raises(Exception, match="not fitted"):
        prune_layers(make_pipeline(HST(deep_tiny), LOESSelector()))


def test_pruned_extractor_reads_the_every_layer_cache(deep_tiny, tmp_path):
    full = make_pipeline(
        HST(deep_tiny, cache=tmp_path), first_layers(2), LogisticRegression()
    ).fit(TEXTS, Y)
    full.predict(NEW)  # every layer of NEW is now in the cache
    pruned = prune_layers(full)
    assert blocks_run(lambda: pruned.predict(NEW)) == 0


# ------------------------------------------------------------- real models
@pytest.mark.integration
def test_probe_on_real_minilm_and_text(minilm_path, rotten_tomatoes_small):
    X, y = rotten_tomatoes_small
    X, y = list(X[:200]), np.asarray(y[:200])
    probe = LayerProbeClassifier(minilm_path, random_state=0, max_length=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        probe.fit(X[:150], y[:150])
    full = make_pipeline(
        HST(minilm_path, max_length=64),
        clone(probe.selector_),
        StandardScaler(),
        _head(probe.fusion_, probe.pipeline_[0].dim_),
    )
    full.fit(X[:150], y[:150])
    np.testing.assert_allclose(
        probe.predict_proba(X[150:]), full.predict_proba(X[150:]), atol=1e-6
    )
    assert probe.score(X[150:], y[150:]) > 0.5


@pytest.mark.integration
def test_probe_on_real_smollm2_saves_and_runs_only_its_blocks(
    smollm2_path, rotten_tomatoes_small, tmp_path
):
    """The decoder our users probe: fit, predict through the deepest selected
    block only, save without the weights and load with identical predictions."""
    X, y = rotten_tomatoes_small
    X, y = list(X[:120]), np.asarray(y[:120])
    probe = LayerProbeClassifier(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        max_length=32,
        batch_size=40,
        selector=LOESSelector(n_layers_to_select=2, random_state=0),
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        probe.fit(X[:80], y[:80])
    deepest = int(probe.selected_layers_.max())
    assert probe.selected_layers_.size == 2 and 1 <= deepest <= 30
    ran = set()  # the distinct decoder blocks that ran
    hook = torch.nn.modules.module.register_module_forward_hook(
        lambda module, i, o: ran.add(id(module))
        if type(module).__name__ == "LlamaDecoderLayer"
        else None
    )
    try:
        probe.predict(X[80:])
    finally:
        hook.remove()
    assert len(ran) == deepest  # no block past the deepest selected one ran
    assert probe.score(X[80:], y[80:]) > 0.5
    folder = save_probe(probe, tmp_path / "smollm2_probe")
    assert sum(f.stat().st_size for f in folder.iterdir()) < 1_000_000  # no weights
    np.testing.assert_allclose(
        load_probe(folder).predict_proba(X[80:]), probe.predict_proba(X[80:]), atol=1e-6
    )
