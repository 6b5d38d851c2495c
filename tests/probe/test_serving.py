"""Exported graphs: save_probe(export=...), serving without torch, file hashes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
from _support.int8 import assert_no_pair_can_saturate
from _support.texts import NEW as REVIEWS_NEW
from _support.texts import TEXTS, Y

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from skloes import probe_folder  # noqa: E402
from skloes.core import _digests  # noqa: E402
from skloes.probe import LayerProbeClassifier, load_probe, save_probe  # noqa: E402
from skloes.selection import MetricTopKSelector  # noqa: E402
from skloes.serving import ExportedProbe, load_exported  # noqa: E402
from skloes.utils._cpu import cpu_description  # noqa: E402

NEW = [*REVIEWS_NEW, "it was quite fun"]

# Imports that a serving process must never make (a meta-path hook raises).
FORBID = """
import sys
class _Forbid:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {FORBIDDEN} or name.startswith("skloes.heads"):
            raise ImportError("forbidden import: " + name)
        return None
sys.meta_path.insert(0, _Forbid())
"""


def _layers(picks, n_layers):
    """A selector that keeps exactly ``picks`` (hidden_states indices)."""
    scores = np.full(n_layers, -1.0)
    scores[list(picks)] = 1.0
    return MetricTopKSelector(
        metric="layer_scores",
        n_layers_to_select=len(picks),
        layer_scores=scores,
        include_embedding=0 in picks,
    )


@pytest.fixture(scope="module")
def tiny_bert(tiny_models):
    return tiny_models("model", num_hidden_layers=4)


@pytest.fixture(scope="module")
def tiny_llama(tiny_models):
    return tiny_models("llama", num_hidden_layers=4, add_bos=True)


def _probe(model, picks, n_layers=5, **params):
    """The default probe on the layers ``picks`` (whatever fusion it chooses:
    every fusion of linear probes is a head of plain arrays)."""
    return LayerProbeClassifier(
        model, selector=_layers(picks, n_layers), random_state=0, **params
    ).fit(TEXTS, Y)


def _graph_blocks(path):
    """The block indices whose weights the ONNX graph holds."""
    import re

    import onnx

    model = onnx.load(str(path))
    names = [i.name for i in model.graph.initializer]
    names += [n.name for n in model.graph.node]
    return {
        int(m.group(1)) for n in names for m in [re.search(r"layers?\.(\d+)", n)] if m
    }


# ------------------------------------------------------------------ export
@pytest.mark.parametrize("pooling", ["mean", "first", "last", "max"])
def test_float32_export_reproduces_the_torch_features_and_stops_at_the_deepest_block(
    tiny_bert, tmp_path, pooling
):
    probe = _probe(tiny_bert, [1, 2], pooling=pooling)
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["carries_weights"] is True
    check = manifest["export"]["check"]
    assert check["max_abs_feature_diff"] < 1e-5
    assert check["same_prediction"] == 1.0 and check["same_input_ids"]
    assert _graph_blocks(folder / "graph.onnx") == {0, 1}  # blocks 1 and 2 only
    served = load_probe(folder)
    assert isinstance(served, ExportedProbe)
    features = probe.pipeline_[0].transform(NEW)
    np.testing.assert_allclose(served.transform(NEW), features, atol=1e-5)
    head = probe.pipeline_[1:]  # the same features give the same scores
    np.testing.assert_allclose(
        served.head_.predict_proba(features), head.predict_proba(features), atol=1e-5
    )
    if hasattr(probe, "decision_function"):  # not for averaged probabilities
        np.testing.assert_allclose(
            served.head_.decision_function(features),
            head.decision_function(features),
            atol=1e-5,
        )
    np.testing.assert_array_equal(served.predict(NEW), probe.predict(NEW))
    # the torch pipeline still loads from the same folder
    torch_probe = load_probe(folder, runtime="torch")
    np.testing.assert_array_equal(torch_probe.predict(NEW), probe.predict(NEW))


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("picks", [[0, 2], [3, 4]])
def test_decoder_export_matches_under_both_paddings(
    tiny_llama, tmp_path, padding_side, picks
):
    """The graph computes a decoder's positions from the mask, so the server
    may pad on either side (torch's vectors do not depend on the side)."""
    probe = _probe(tiny_llama, picks)  # exclude_tokens="auto": the first token
    extractor = probe.pipeline_[0]
    assert extractor.exclude_tokens_ == "first"
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    served = load_probe(folder)
    served._export["tokenizer"]["padding_side"] = padding_side
    texts = NEW + TEXTS[:7]
    feeds = served._feeds(served._encode(texts), list(range(len(texts))))
    first_column = feeds["attention_mask"][:, 0]
    assert (first_column == 0).any() == (padding_side == "left")
    np.testing.assert_allclose(
        served.transform(texts), extractor.transform(texts), atol=1e-5
    )


def test_special_token_exclusion_is_an_input_of_the_graph(tiny_bert, tmp_path):
    probe = _probe(tiny_bert, [2, 3], extractor_params={"exclude_tokens": "special"})
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    export = json.loads((folder / "manifest.json").read_text())["export"]
    assert "special_tokens_mask" in export["graph"]["inputs"]
    np.testing.assert_allclose(
        load_probe(folder).transform(NEW), probe.pipeline_[0].transform(NEW), atol=1e-5
    )


def test_int8_export_records_its_check_and_predicts(tiny_bert, tmp_path):
    probe = _probe(tiny_bert, [1, 4], pooling="mean")
    folder = save_probe(probe, tmp_path / "p", export="onnx-int8", check_texts=TEXTS)
    names = sorted(os.listdir(folder))
    assert names == [
        "README.md",
        "estimator.skops",
        "graph-int8.onnx",
        "head.npz",
        "manifest.json",
        "tokenizer.json",
    ]
    export = json.loads((folder / "manifest.json").read_text())["export"]
    assert export["precision"] == "int8"
    check = export["check"]
    assert {"max_abs_feature_diff", "same_prediction", "max_proba_diff"} <= set(check)
    assert check["n_texts"] == len(TEXTS)
    assert check["cpu"] == cpu_description()["summary"]  # the check's kernels
    import onnx

    ops = {n.op_type for n in onnx.load(str(folder / "graph-int8.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops
    assert export["graph"]["weight_max"] == 64
    assert_no_pair_can_saturate(folder / "graph-int8.onnx")  # the same on any CPU
    served = load_probe(folder)
    assert served.precision_ == "int8"
    proba = served.predict_proba(NEW)
    assert proba.shape == (len(NEW), 2) and np.allclose(proba.sum(axis=1), 1)


def _float_products(path):
    """Names of the graph's products by a weight matrix left in float32."""
    import onnx

    graph = onnx.load(str(path)).graph
    weights = {init.name for init in graph.initializer}
    return sorted(
        n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights
    )


def test_int8_keeps_a_decoders_feed_forward_outputs_in_float32(
    tiny_llama, tiny_bert, tmp_path
):
    """The Llama family's rule (skloes.models._families): feed-forward
    outputs, keys and values in float32, per-token scales elsewhere."""
    llama = _probe(tiny_llama, [1, 3])
    folder = save_probe(llama, tmp_path / "l", export="onnx-int8", check_texts=TEXTS)
    kept = _float_products(folder / "graph-int8.onnx")
    assert len(kept) == 9
    for part in ("mlp/down_proj", "self_attn/k_proj", "self_attn/v_proj"):
        assert sum(part in name for name in kept) == 3  # blocks 1..3
    graph = json.loads((folder / "manifest.json").read_text())["export"]["graph"]
    assert graph["float32_products"] == 9
    assert graph["activation_scales"] == "token" and graph["smoothing"] == 0.8
    assert load_probe(folder).predict(NEW).shape == (len(NEW),)
    # An encoder is quantized whole: its int8 loses little (user guide).
    bert = save_probe(
        _probe(tiny_bert, [1, 4]), tmp_path / "b", export="onnx-int8", check_texts=TEXTS
    )
    assert _float_products(bert / "graph-int8.onnx") == []
    graph = json.loads((bert / "manifest.json").read_text())["export"]["graph"]
    assert graph["activation_scales"] == "token"  # batch-independent


def test_feed_forward_outputs_are_found_by_shape_not_by_name(tiny_llama, tmp_path):
    from transformers import AutoConfig

    from skloes.models._graph import feed_forward_outputs

    folder = save_probe(
        _probe(tiny_llama, [2]), tmp_path / "f", export="onnx", check_texts=TEXTS
    )
    config = AutoConfig.from_pretrained(tiny_llama)
    names = feed_forward_outputs(folder / "graph.onnx", config)
    assert len(names) == 2 and all("down_proj" in n for n in names)
    config.intermediate_size = config.hidden_size  # ambiguous: keep none
    assert feed_forward_outputs(folder / "graph.onnx", config) == []


def test_the_saved_graph_is_optimized_once_and_loads_as_before(tiny_bert, tmp_path):
    import onnx

    from skloes.serving import load_exported

    folder = save_probe(
        _probe(tiny_bert, [1, 2]), tmp_path / "o", export="onnx", check_texts=TEXTS
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["export"]["graph"]["optimized"] == "extended"
    domains = {n.domain for n in onnx.load(str(folder / "graph.onnx")).graph.node}
    assert "com.microsoft" in domains  # ONNX Runtime's fused operators
    served = load_exported(folder).predict_proba(NEW)
    # A folder saved before graphs were optimized is optimized at load instead.
    del manifest["export"]["graph"]["optimized"]
    probe_folder.seal_export(manifest["export"])  # as that save sealed it
    (folder / "manifest.json").write_text(json.dumps(manifest))
    np.testing.assert_allclose(load_exported(folder).predict_proba(NEW), served)


def test_a_regressor_and_a_non_linear_head_export(tiny_bert, tmp_path):
    from sklearn.neighbors import KNeighborsClassifier

    from skloes.probe import LayerProbeRegressor

    reg = LayerProbeRegressor(tiny_bert, selector=_layers([1, 2], 5), device="cpu").fit(
        TEXTS, Y.astype(float) * 2.5
    )
    folder = save_probe(reg, tmp_path / "r", export="onnx", check_texts=TEXTS)
    served = load_probe(folder)
    assert served.classes_ is None
    np.testing.assert_allclose(served.predict(NEW), reg.predict(NEW), atol=1e-5)
    # brute force: a k-d tree holds types the trust rule asks the user for
    knn = _probe(
        tiny_bert, [1, 2], estimator=KNeighborsClassifier(3, algorithm="brute")
    )
    folder = save_probe(knn, tmp_path / "k", export="onnx", check_texts=TEXTS)
    assert (folder / "head.skops").is_file()
    np.testing.assert_array_equal(load_probe(folder).predict(NEW), knn.predict(NEW))


def _targets(task):
    if task == "regression":
        return Y * 2.5 + np.arange(len(Y)) * 0.1
    return np.arange(len(Y)) % 3 if task == "three classes" else Y


def _fitted(model, task, fusion, picks):
    from skloes.probe import LayerProbeRegressor

    kind = LayerProbeRegressor if task == "regression" else LayerProbeClassifier
    return kind(model, selector=_layers(picks, 5), fusion=fusion, random_state=0).fit(
        TEXTS, _targets(task)
    )


@pytest.mark.parametrize("picks", [[1, 3], [2]])
@pytest.mark.parametrize("fusion", ["concatenate", "average", "stack"])
@pytest.mark.parametrize("task", ["two classes", "three classes", "regression"])
def test_every_fusion_of_linear_probes_is_served_from_plain_arrays(
    tiny_bert, tmp_path, task, fusion, picks
):
    probe = _fitted(tiny_bert, task, fusion, picks)
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    assert not (folder / "head.skops").exists()
    export = json.loads((folder / "manifest.json").read_text())["export"]
    linear = "linear" if task == "regression" else "logistic"
    assert export["head"] == {**export["head"], "file": "head.npz"}
    assert export["head"]["kind"] == (linear if fusion == "concatenate" else fusion)
    with np.load(folder / "head.npz", allow_pickle=False) as arrays:
        names = set(arrays.files)
    if fusion != "concatenate":  # each layer's own probe
        assert {"layer_coef", "layer_intercept"} <= names
        assert ("final_coef" in names) == (fusion == "stack" and len(picks) > 1)
    assert export["check"]["max_head_diff"] < 1e-6  # the numpy head: the probe's
    served = load_exported(folder)
    # float32 graph against torch: ~1e-6 in the features, scaled by the head
    np.testing.assert_allclose(
        served.predict(NEW), probe.predict(NEW), rtol=1e-5, atol=1e-5
    )
    for method in ("predict_proba", "decision_function"):
        if hasattr(probe, method):
            np.testing.assert_allclose(
                getattr(served, method)(NEW),
                getattr(probe, method)(NEW),
                rtol=1e-5,
                atol=1e-5,
            )
    if task != "regression" and not hasattr(probe, "decision_function"):
        with pytest.raises(AttributeError, match="averaged.*no decision scores"):
            served.decision_function(NEW)


def test_a_head_of_plain_arrays_that_does_not_match_the_manifest_is_refused(
    tiny_bert, tmp_path
):
    folder = save_probe(
        _fitted(tiny_bert, "three classes", "stack", [1, 3]),
        tmp_path / "p",
        export="onnx",
        check_texts=TEXTS,
    )
    manifest = json.loads((folder / "manifest.json").read_text())
    with np.load(folder / "head.npz", allow_pickle=False) as data:
        arrays = dict(data)
    arrays["layer_coef"] = arrays["layer_coef"][:, :2]  # two classes' rows of 3
    np.savez(folder / "head.npz", **arrays)
    manifest["export"]["head"]["sha256"] = _digests.file_sha256(folder / "head.npz")
    probe_folder.seal_export(manifest["export"])  # as a save would seal it
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="head.npz is not a readable head of plain"):
        load_exported(folder)


@pytest.mark.parametrize("vnni", [False, True])
def test_an_8_bit_int8_folder_warns_only_on_a_cpu_without_vnni(
    tiny_bert, tmp_path, monkeypatch, vnni
):
    """A folder exported before the weights were 7-bit (its manifest has no
    ``weight_max``) can saturate where the CPU has no VNNI: said at load."""
    from skloes import serving

    folder = save_probe(
        _probe(tiny_bert, [1, 4], pooling="mean"),
        tmp_path / "p",
        export="onnx-int8",
        check_texts=TEXTS,
    )
    monkeypatch.setattr(serving, "has_int8_dot_product", lambda: vnni)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_exported(folder)  # a folder of this skloes: silent on any CPU
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["export"]["graph"]["weight_max"]
    probe_folder.seal_export(manifest["export"])  # as an older save sealed it
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = load_exported(folder)
    said = [str(w.message) for w in caught if "saturate" in str(w.message)]
    assert len(said) == (0 if vnni else 1)
    if said:
        assert "no VNNI" in said[0] and "save the probe again" in said[0]
    assert served.predict(NEW).shape == (len(NEW),)  # it still serves


@pytest.mark.parametrize("model", ["tiny_bert", "tiny_llama"])
def test_an_int8_probe_gives_a_text_the_same_output_whatever_its_batch(
    model, request, tmp_path
):
    """Activation scales per token row: a text's probabilities do not depend
    on the other texts of its batch, nor on the padding they bring."""
    probe = _probe(request.getfixturevalue(model), [1, 3])
    folder = save_probe(probe, tmp_path / "p", export="onnx-int8", check_texts=TEXTS)
    served = load_exported(folder)
    text = "a good fun film"
    alone = served.predict_proba([text])
    long = " ".join(TEXTS[:8])
    batches = [
        [text, long],
        [long, "bad", text, "warm and fun " * 5],
        NEW + TEXTS[:20] + [text],
    ]
    for batch in batches:
        proba = served.predict_proba(batch)[batch.index(text)]
        np.testing.assert_allclose(proba, alone[0], atol=1e-5)
    for batch_size in (1, 3, 32):  # the shards of predict_to_parquet, in effect
        served.batch_size = batch_size
        np.testing.assert_allclose(
            served.predict_proba(NEW + TEXTS),
            load_exported(folder).predict_proba(NEW + TEXTS),
            atol=1e-5,
        )


def test_bad_export_parameters_are_refused_by_name(tiny_bert, tmp_path):
    probe = _probe(tiny_bert, [1, 2])
    with pytest.raises(ValueError, match="`export` must be one of"):
        save_probe(probe, tmp_path / "a", export="tflite", check_texts=TEXTS)
    with pytest.raises(ValueError, match="`check_texts` must be"):
        save_probe(probe, tmp_path / "b", export="onnx")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    folder = save_probe(probe, tmp_path / "c")
    with pytest.raises(ValueError, match="`runtime` must be one of"):
        load_probe(folder, runtime="tensorrt")
    with pytest.raises(ValueError, match="holds no exported graph"):
        load_probe(folder, runtime="onnx")
    assert not isinstance(load_probe(folder), ExportedProbe)  # weight-free default


@pytest.mark.parametrize("target", ["graph.onnx", "tokenizer.json", "head.npz"])
def test_a_tampered_or_swapped_file_is_refused_naming_the_folder(
    tiny_bert, tmp_path, target
):
    probe = _probe(tiny_bert, [1, 2])
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    other = save_probe(
        _probe(tiny_bert, [1, 3]), tmp_path / "q", export="onnx", check_texts=TEXTS
    )
    if (other / target).read_bytes() != (folder / target).read_bytes():
        shutil.copy(other / target, folder / target)  # another save's file
        with pytest.raises(ValueError, match=f"{target} in .*p'.* does not hash"):
            load_exported(folder)
    (folder / target).write_bytes((folder / target).read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match="does not hash"):
        load_probe(folder)
    (folder / target).unlink()
    with pytest.raises(ValueError, match=f"{target} .*is missing"):
        load_probe(folder)  # the manifest's record of the files names it
    with pytest.raises(ValueError, match=f"{target} .*is missing"):
        load_exported(folder)  # the same record, read by the one reader


# --------------------------------------------------------- without torch
def _forbidding(modules, code):
    return FORBID.replace("{FORBIDDEN}", repr(set(modules))) + code


def test_an_exported_probe_predicts_in_a_process_that_cannot_import_torch(
    tiny_bert, tmp_path
):
    probe = _probe(tiny_bert, [1, 2])
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    code = _forbidding(
        ["torch", "transformers", "sklearn", "scipy", "skops"],
        "import json\nfrom skloes.serving import load_exported\n"
        "p = load_exported(sys.argv[1])\n"
        "print(json.dumps(p.predict_proba(json.loads(sys.argv[2])).tolist()))\n",
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), json.dumps(NEW)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(
        np.array(json.loads(out.stdout)), probe.predict_proba(NEW), atol=1e-5
    )


SERVE_ALL = """
import json
from skloes.serving import load_exported
out = {}
for folder in sys.argv[2:]:
    p = load_exported(folder)
    if type(p.head_).__name__ != "_SkopsHead":
        for plain in ("sklearn", "scipy", "skops"):  # a head of plain arrays
            assert plain not in sys.modules, (folder, plain)
    texts = json.loads(sys.argv[1])
    out[folder] = [p.predict(texts).tolist(), p.predict_proba(texts).tolist()]
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")]
assert not loaded and "skloes.heads" not in sys.modules, loaded
print(json.dumps(out))
"""


def _serve_without_torch(folders, texts, *, block):
    """``{folder: (labels, proba)}`` from one process that imports neither
    torch, transformers nor skloes.heads: where they cannot be imported
    (``block``), or where they could but are not."""
    code = SERVE_ALL
    if block:
        code = _forbidding(["torch", "transformers"], code)
    else:
        code = "import sys\n" + code
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts), *map(str, folders)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return {
        k: (np.array(a), np.array(b)) for k, (a, b) in json.loads(out.stdout).items()
    }


@pytest.mark.parametrize("export", ["onnx", "onnx-int8"])
def test_every_fusion_and_a_skops_head_serve_where_torch_cannot_be_imported(
    tiny_bert, tmp_path, export
):
    from sklearn.neighbors import KNeighborsClassifier

    probes = {"default": _probe(tiny_bert, [1, 3])}
    for fusion in ("concatenate", "average", "stack"):
        probes[fusion] = _probe(tiny_bert, [1, 3], fusion=fusion)
    probes["skops"] = _probe(  # per-layer non-linear probes: a skops archive
        tiny_bert,
        [1, 3],
        fusion="average",
        estimator=KNeighborsClassifier(3, algorithm="brute"),
    )
    folders = {
        name: save_probe(p, tmp_path / name, export=export, check_texts=TEXTS)
        for name, p in probes.items()
    }
    assert (folders["skops"] / "head.skops").is_file()
    served = _serve_without_torch(list(folders.values()), NEW, block=True)
    # installed but not imported (skops lists scikit-learn's estimators by
    # importing all of it, whose array-API shim of torch imports torch)
    assert _serve_without_torch(list(folders.values()), NEW, block=False)
    for name, probe in probes.items():
        labels, proba = served[str(folders[name])]
        here = load_exported(folders[name])  # the same graph in this process
        np.testing.assert_array_equal(labels, here.predict(NEW))
        np.testing.assert_allclose(proba, here.predict_proba(NEW), atol=1e-6)
        if export == "onnx":  # the float graph gives the torch probe's answers
            np.testing.assert_array_equal(labels, probe.predict(NEW))
            np.testing.assert_allclose(proba, probe.predict_proba(NEW), atol=1e-5)


def test_skloes_predict_runs_an_exported_probe_without_torch(tiny_bert, tmp_path):
    probe = _probe(tiny_bert, [1, 2])
    folder = save_probe(probe, tmp_path / "p", export="onnx", check_texts=TEXTS)
    data = tmp_path / "new.csv"
    data.write_text("text\n" + "\n".join(NEW) + "\n")
    out_csv = tmp_path / "pred.csv"
    code = _forbidding(
        ["torch", "transformers", "pandas"],
        "from skloes.cli import main\n"
        "sys.exit(main(['predict', sys.argv[1], '--data', sys.argv[2], "
        "'--out', sys.argv[3], '--threads', '1']))\n",
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(data), str(out_csv)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split(",") for line in out_csv.read_text().splitlines()]
    assert rows[0] == ["prediction", "proba_0", "proba_1"]
    assert [int(r[0]) for r in rows[1:]] == probe.predict(NEW).tolist()
    np.testing.assert_allclose(
        np.array([[float(v) for v in r[1:]] for r in rows[1:]]),
        probe.predict_proba(NEW),
        atol=1e-5,
    )


# ------------------------------------------------------------ file hashes
def test_a_hash_record_is_reused_across_processes_until_the_file_changes(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(_digests, "RACY_SECONDS", 0.0)
    file = tmp_path / "weights.bin"
    file.write_bytes(b"a" * 1000)
    first = _digests.file_sha256(file)
    _digests._MEMO.clear()  # a new process
    opened = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        if str(path) == str(file):
            opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)
    assert _digests.file_sha256(file) == first and not opened  # from the record
    # same size, other bytes, the old mtime restored: ctime moved, so rehashed
    stat = os.stat(file)
    with real_open(file, "r+b") as handle:
        handle.write(b"b")
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _digests._MEMO.clear()
    assert _digests.file_sha256(file) != first and len(opened) == 1


def test_a_hash_record_anyone_else_can_write_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(_digests, "RACY_SECONDS", 0.0)
    file = tmp_path / "weights.bin"
    file.write_bytes(b"a" * 1000)
    real = _digests.file_sha256(file)
    record = next((tmp_path / "home" / "digests").glob("*.json"))
    data = json.loads(record.read_text())
    data["sha256"] = "0" * 64  # a planted hash
    record.write_text(json.dumps(data))
    os.chmod(record, 0o666)
    _digests._MEMO.clear()
    assert _digests.file_sha256(file) == real  # world-writable: ignored
    record.write_text(json.dumps(data))  # planted again, now private
    os.chmod(record, 0o600)
    _digests._MEMO.clear()
    assert _digests.file_sha256(file) == "0" * 64  # the user's own store is trusted


def test_a_hash_taken_right_after_a_change_is_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    file = tmp_path / "weights.bin"
    file.write_bytes(b"a" * 10)
    _digests.file_sha256(file)
    assert not list((tmp_path / "home" / "digests").glob("*.json"))


# ------------------------------------------------------------ real models
@pytest.mark.integration
def test_minilm_exports_in_float32_and_int8(
    minilm_path, rotten_tomatoes_small, tmp_path
):
    X, y = rotten_tomatoes_small
    X, y = list(X[:120]), y[:120]
    probe = LayerProbeClassifier(
        minilm_path, selector=_layers([2, 4], 7), max_length=48, device="cpu"
    ).fit(X, y)
    folder = save_probe(probe, tmp_path / "f", export="onnx", check_texts=X)
    check = json.loads((folder / "manifest.json").read_text())["export"]["check"]
    assert check["max_abs_feature_diff"] < 1e-4 and check["same_prediction"] == 1.0
    assert _graph_blocks(folder / "graph.onnx") == {0, 1, 2, 3}
    folder = save_probe(probe, tmp_path / "i", export="onnx-int8", check_texts=X)
    check = json.loads((folder / "manifest.json").read_text())["export"]["check"]
    assert check["same_prediction"] >= 0.9 and check["max_proba_diff"] < 0.2
    served = load_probe(folder)
    new = list(rotten_tomatoes_small[0][120:200])
    agree = np.mean(served.predict(new) == probe.predict(new))
    assert agree >= 0.9


@pytest.mark.integration
def test_smollm2_tokenizer_from_gguf_round_trips_on_real_texts(
    smollm2_path, rotten_tomatoes_small, tmp_path
):
    """The tokenizer.json an export writes gives SmolLM2's ids, both paddings."""
    from transformers import AutoTokenizer

    from skloes.models._inputs import pad_batch, tokenize_texts
    from skloes.probe._export import _write_tokenizer
    from skloes.serving import _tokenizer

    texts = list(rotten_tomatoes_small[0][:200]) + ["", " ", "héllo wörld ✓", "a\nb"]
    texts = [t for t in texts if t.strip()]
    for side in ("right", "left"):
        hf = AutoTokenizer.from_pretrained(smollm2_path)
        hf.padding_side = side
        spec = _write_tokenizer(hf, tmp_path, 48, "test")
        ours = _tokenizer(tmp_path / "tokenizer.json", spec).encode_batch(texts)
        theirs = tokenize_texts(hf, texts, 48)
        assert [e.ids for e in ours] == [r.tolist() for r in theirs["input_ids"]]
        exported = ExportedProbe.__new__(ExportedProbe)
        exported._export = {"tokenizer": spec}
        exported._inputs = ["input_ids", "attention_mask"]
        index = list(range(16))
        feeds = exported._feeds(ours, index)
        inputs, mask, _ = pad_batch(hf, theirs, index)
        np.testing.assert_array_equal(feeds["input_ids"], inputs["input_ids"].numpy())
        np.testing.assert_array_equal(feeds["attention_mask"], mask.long().numpy())
