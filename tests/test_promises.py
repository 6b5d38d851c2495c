"""The promises of the README and the user guide's front pages, kept on the
defaults.

Each test runs one promise as a user would: with the library's default
parameters wherever the promise does not name one (a parameter the promise
names, such as ``cache=`` or ``export="onnx-int8"``, is set as it says). No
helper here pins a fusion, a selector or a seed: a default that changes is
held to every promise made on the one before (the charter's "promises
outlive defaults").
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.integration

# Imports a torch-free serving process must never make: a meta-path hook makes
# each of them raise, as in an environment with only ``skloes[serve]``.
NO_TORCH = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "transformers", "skops"} or (
            name.startswith("skloes.heads")
        ):
            raise ImportError("not installed here: " + name)
        return None
sys.meta_path.insert(0, _Absent())
"""


@pytest.fixture(scope="module")
def reviews(rotten_tomatoes_small):
    """200 real Rotten Tomatoes texts to fit on, 100 held out."""
    X, y = rotten_tomatoes_small
    X, y = list(X), np.asarray(y)
    return X[:200], y[:200], X[200:]


@pytest.fixture(scope="module")
def default_probe(reviews, minilm_path):
    """``LayerProbeClassifier()``: no model, no parameter."""
    from skloes.probe import LayerProbeClassifier

    X, y, _ = reviews
    return LayerProbeClassifier().fit(X, y)


def test_the_default_probe_is_minilm_loes_and_a_logistic_head(default_probe):
    """README: "LayerProbeClassifier() with no model runs the bundled MiniLM
    (7 hidden states of width 384 ...), chooses layers with LOES and fits a
    logistic regression on them"; the docstring: LOES keeps 4 layers."""
    from sklearn.linear_model import LogisticRegression

    from skloes.selection import LOESSelector

    probe = default_probe
    assert probe.n_model_layers_ == 7
    assert isinstance(probe.selector_, LOESSelector)
    assert probe.selected_layers_.size == 4
    heads = getattr(probe.estimator_, "estimators_", [probe.estimator_])
    assert all(isinstance(head, LogisticRegression) for head in heads)
    assert all(
        head.coef_.shape[1] == 384 * (4 if len(heads) == 1 else 1) for head in heads
    )


def test_the_default_probe_fits_the_same_twice(default_probe, reviews):
    """The probe's docstring: with ``random_state=None`` "the same rows give
    the same fitted probe and the same predictions on every fit"."""
    from skloes.probe import LayerProbeClassifier

    X, y, held_out = reviews
    again = LayerProbeClassifier().fit(X, y)
    assert again.fusion_ == default_probe.fusion_
    np.testing.assert_array_equal(
        again.selected_layers_, default_probe.selected_layers_
    )
    np.testing.assert_array_equal(
        again.predict_proba(held_out), default_probe.predict_proba(held_out)
    )


def test_the_default_probe_in_a_grid_search_runs_each_text_once(
    reviews, minilm_path, tmp_path, texts_through_model
):
    """README: "With cache= set, the fits of the search run each of the texts
    through the model once"; the best probe predicts new texts."""
    from sklearn.model_selection import GridSearchCV

    from skloes.probe import LayerProbeClassifier

    X, y, _ = reviews
    grid = {"selector__n_layers_to_select": [1, 2, 4], "estimator__C": [0.01, 0.1]}
    probe = LayerProbeClassifier(cache=tmp_path / "cache")
    search = GridSearchCV(probe, grid, cv=3).fit(X, y)
    assert texts_through_model[0] == len(set(X))
    best = search.best_estimator_
    assert (
        best.selected_layers_.size
        == search.best_params_["selector__n_layers_to_select"]
    )
    assert set(best.predict(["a warm, funny and moving film"])) <= set(y)


def test_the_default_probe_predicts_through_its_deepest_layer_only(
    default_probe, reviews
):
    """README: "without a cache, a fitted probe predicts by running the model
    only through its deepest selected layer"."""
    import torch

    ran = set()

    def hook(module, inputs, output):
        if type(module).__name__ == "BertLayer":
            ran.add(id(module))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        default_probe.predict(reviews[2][:8])
    finally:
        handle.remove()
    # hidden state l is the output of block l (0: the embeddings)
    assert len(ran) == int(default_probe.selected_layers_.max())


def test_the_default_probe_saves_without_pickle_and_loads_in_a_new_process(
    default_probe, reviews, tmp_path
):
    """README: "save_probe(...)  # no model weights, no pickle"; load_probe
    gives it back in a fresh process."""
    from skloes.probe import save_probe

    folder = save_probe(default_probe, tmp_path / "probe")
    names = [p.name for p in folder.rglob("*") if p.is_file()]
    assert not [n for n in names if n.endswith((".pkl", ".pickle", ".joblib"))]
    assert not [n for n in names if n.endswith((".safetensors", ".bin", ".onnx"))]
    held_out = reviews[2][:20]
    code = textwrap.dedent(
        f"""
        import json, sys
        from skloes.probe import load_probe
        probe = load_probe({str(folder)!r})
        texts = json.loads(sys.stdin.read())
        print(json.dumps(probe.predict_proba(texts).tolist()))
        """
    )
    out = _run(code, json.dumps(held_out))
    np.testing.assert_allclose(
        json.loads(out), default_probe.predict_proba(held_out), rtol=1e-6, atol=1e-7
    )


def test_the_default_probe_serves_without_torch(default_probe, reviews, tmp_path):
    """README: "To serve it without torch, save_probe(best, "served",
    export="onnx-int8", check_texts=X) ...; with only pip install
    skloes[serve], skloes.serving.load_exported("served") predicts from it"
    (here, a process where torch, transformers and skops cannot be imported).
    """
    from skloes.probe import save_probe

    X, _, held_out = reviews
    folder = save_probe(
        default_probe, tmp_path / "served", export="onnx-int8", check_texts=X
    )
    code = NO_TORCH + textwrap.dedent(
        f"""
        import json, sys
        from skloes.serving import load_exported
        served = load_exported({str(folder)!r})
        texts = json.loads(sys.stdin.read())
        print(json.dumps(served.predict(texts).tolist()))
        heavy = ("torch", "transformers")
        assert not [m for m in sys.modules if m.split(".")[0] in heavy]
        """
    )
    served = np.asarray(json.loads(_run(code, json.dumps(held_out))))
    same = np.mean(served == default_probe.predict(held_out))
    assert same >= 0.99, f"same class on {same:.1%} of held-out texts"


def test_the_main_job_writes_its_folder_and_its_probe_predicts(
    tmp_path, minilm_path, reviews, capsys
):
    """README: the main job "writes skloes_report/ (layers.csv, profile.png,
    selection.json, and probe/ ...)", and ``skloes predict skloes_report/probe
    --data new.csv`` runs it on new texts (the MiniLM variant of the job, with
    the sample size the README's command names reduced)."""
    import csv

    from skloes.cli import main

    out = tmp_path / "skloes_report"
    model = "sentence-transformers/all-MiniLM-L6-v2"
    argv = ["probe", "--model", model, "--max-samples", "200", "--out", str(out)]
    argv += ["--save", str(out / "probe")]  # what scripts/main.sh adds
    assert main(argv) == 0, capsys.readouterr().err
    for name in ("layers.csv", "profile.png", "selection.json", "probe"):
        assert (out / name).exists(), name
    new = tmp_path / "new.csv"
    with open(new, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text"])
        writer.writerows([[t] for t in reviews[2][:5]])
    capsys.readouterr()
    assert main(["predict", str(out / "probe"), "--data", str(new)]) == 0
    printed = capsys.readouterr().out
    assert len([line for line in printed.splitlines() if line.strip()]) >= 5


def _run(code, stdin):
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]
