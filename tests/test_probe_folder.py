"""The saved probe folder's one definition (skloes.probe_folder), without a model.

Folders here are written by hand, as a tamperer or an older skloes would:
what a save writes end to end is tested in tests/probe and tests/bad_input.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from skloes import probe_folder
from skloes.core._digests import file_sha256

SKLOES = Path(probe_folder.__file__).parent


def _write(folder, name, text):
    (folder / name).write_text(text)
    return {"file": name, "sha256": file_sha256(folder / name)}


def _export(folder, precision="int8", kind="logistic"):
    graph = probe_folder.GRAPHS[precision]
    return {
        "format": probe_folder.EXPORT_FORMAT,
        "precision": precision,
        "layers": [2, 4],
        "pooling": "mean",
        "batching": {"batch_size": 32, "max_batch_tokens": None},
        "tokenizer": {
            **_write(folder, probe_folder.TOKENIZER, "{}"),
            "max_length": 64,
            "padding_side": "right",
            "pad_token_id": 0,
        },
        "graph": {**_write(folder, graph, "graph"), "optimized": "extended"},
        "head": {
            **_write(folder, probe_folder.HEADS[kind], "head"),
            "kind": kind,
            "classes": {"values": ["no", "yes"], "dtype": "object"},
        },
    }


def _saved(folder, export=True, **extra):
    """A folder as a save writes it (the estimator's bytes are not read)."""
    folder.mkdir(exist_ok=True)
    names = [probe_folder.ESTIMATOR, probe_folder.CARD]
    (folder / probe_folder.ESTIMATOR).write_bytes(b"zip")
    (folder / probe_folder.CARD).write_text("# card\n")
    manifest = {
        "format": probe_folder.FORMAT,
        "model": "org/model",
        "model_path": "/models/x",
        "model_fingerprint": "f" * 64,
    }
    if export:
        manifest["export"] = probe_folder.seal_export(_export(folder))
        names += [manifest["export"][p]["file"] for p in ("graph", "tokenizer", "head")]
    manifest["files"] = sorted(names)
    manifest["sha256"] = probe_folder.file_hashes(folder, names)
    manifest.update(extra)
    probe_folder.write_manifest(folder, manifest)
    return folder, manifest


def test_a_folder_an_older_skloes_saved_reads_and_keeps_its_manifest_bytes(tmp_path):
    folder, manifest = _saved(tmp_path / "p")
    old = json.dumps(manifest, indent=2) + "\n"  # as every skloes has written it
    (folder / probe_folder.MANIFEST).write_text(old, encoding="utf-8")
    assert probe_folder.read_manifest(folder, "me") == manifest
    assert probe_folder.read_export(folder, "me") == manifest["export"]
    assert probe_folder.recorded_files(folder) == manifest["files"]
    assert probe_folder.changed_files(folder) == []
    probe_folder.checked_file(folder, manifest["export"]["graph"], "me")
    # Written again, the same bytes: a prediction job's digest hashes them.
    probe_folder.write_manifest(folder, manifest)
    assert (folder / probe_folder.MANIFEST).read_text(encoding="utf-8") == old
    # The store's older style (indented by one, keys sorted) reads too.
    style = json.dumps(manifest, indent=1, sort_keys=True)
    (folder / probe_folder.MANIFEST).write_text(style, encoding="utf-8")
    assert probe_folder.read_manifest(folder, "me") == manifest


# ------------------------------------------------------- one owner of names
def test_no_module_but_the_owner_spells_a_file_name_of_the_folder():
    names = [
        probe_folder.MANIFEST,
        probe_folder.ESTIMATOR,
        probe_folder.TOKENIZER,
        *probe_folder.GRAPHS.values(),
        *set(probe_folder.HEADS.values()),
    ]
    pattern = re.compile("|".join(re.escape(f'"{n}"') for n in names))
    # A Hugging Face model folder has a tokenizer.json of its own: the model
    # cache (skloes/models) writes and checks that one, not a probe folder's.
    model_pattern = re.compile(
        "|".join(re.escape(f'"{n}"') for n in names if n != probe_folder.TOKENIZER)
    )
    spelled = [
        str(path.relative_to(SKLOES.parent))
        for path in SKLOES.rglob("*.py")
        if path != Path(probe_folder.__file__)
        and (model_pattern if path.parent.name == "models" else pattern).search(
            path.read_text(encoding="utf-8")
        )
    ]
    assert spelled == []


def test_a_saved_folder_reads_back_with_its_export(tmp_path):
    folder, manifest = _saved(tmp_path / "p")
    assert probe_folder.read_manifest(folder, "me") == manifest
    assert probe_folder.read_export(folder, "me") == manifest["export"]
    assert probe_folder.recorded_files(folder) == manifest["files"]
    assert probe_folder.changed_files(folder) == []


# --------------------------------------------------- the export's schema
def _set(path, value):
    def edit(export):
        node = export
        for key in path[:-1]:
            node = node[key]
        if value is _DROP:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return edit


_DROP = object()
BAD_EXPORTS = [  # (id, edit, the field the error names)
    ("head_kind_unknown", _set(["head", "kind"], "svm"), "export.head.kind"),
    ("head_kind_missing", _set(["head", "kind"], _DROP), "export.head.kind"),
    ("head_file_other_kind", _set(["head", "kind"], "skops"), "export.head.file"),
    ("classes_missing", _set(["head", "classes"], None), "export.head.classes"),
    ("classes_not_a_list", _set(["head", "classes"], {"values": 3}), "classes"),
    ("precision_unknown", _set(["precision"], "int4"), "export.precision"),
    ("graph_of_other_precision", _set(["precision"], "float32"), "export.graph.file"),
    ("layers_empty", _set(["layers"], []), "export.layers"),
    ("layers_negative", _set(["layers"], [-1, 2]), "export.layers"),
    ("layers_text", _set(["layers"], "2,4"), "export.layers"),
    ("layers_floats", _set(["layers"], [2.0, 4.0]), "export.layers"),
    ("layers_bools", _set(["layers"], [True, False]), "export.layers"),
    ("pooling_missing", _set(["pooling"], _DROP), "export.pooling"),
    ("batching_not_a_dict", _set(["batching"], 32), "export.batching"),
    ("batch_size_zero", _set(["batching", "batch_size"], 0), "batch_size"),
    ("batch_size_text", _set(["batching", "batch_size"], "32"), "batch_size"),
    ("max_tokens_negative", _set(["batching", "max_batch_tokens"], -5), "tokens"),
    ("max_length_zero", _set(["tokenizer", "max_length"], 0), "max_length"),
    ("padding_side_up", _set(["tokenizer", "padding_side"], "up"), "padding_side"),
    ("pad_id_text", _set(["tokenizer", "pad_token_id"], "<pad>"), "pad_token_id"),
    ("tokenizer_file_path", _set(["tokenizer", "file"], "../t.json"), "tokenizer"),
    ("graph_file_elsewhere", _set(["graph", "file"], "/tmp/g.onnx"), "graph.file"),
    ("graph_sha_short", _set(["graph", "sha256"], "abc"), "graph.sha256"),
    ("graph_optimized_other", _set(["graph", "optimized"], "all"), "optimized"),
    ("head_not_a_dict", _set(["head"], "head.npz"), "export.head"),
]


@pytest.mark.parametrize(
    "edit, field", [pytest.param(e, f, id=i) for i, e, f in BAD_EXPORTS]
)
def test_an_export_entry_skloes_did_not_write_is_refused_by_field(
    tmp_path, edit, field
):
    folder, manifest = _saved(tmp_path / "p")
    export = copy.deepcopy(manifest["export"])
    edit(export)
    manifest["export"] = export
    probe_folder.write_manifest(folder, manifest)
    for read in (probe_folder.read_manifest, probe_folder.read_export):
        with pytest.raises(ValueError) as info:
            read(folder, "me")
        message = str(info.value)
        assert message.startswith("me: ") and "\n" not in message
        assert field in message and str(folder) in message


def test_an_export_of_another_format_is_refused_naming_it(tmp_path):
    folder, manifest = _saved(tmp_path / "p")
    manifest["export"]["format"] = 2
    probe_folder.write_manifest(folder, manifest)
    with pytest.raises(ValueError, match="exported graph of format 2"):
        probe_folder.read_export(folder, "me")


def test_a_changed_export_file_is_refused_as_it_is_opened(tmp_path):
    folder, manifest = _saved(tmp_path / "p")
    (folder / "graph-int8.onnx").write_text("another graph")
    with pytest.raises(ValueError, match="graph-int8.onnx in .* does not hash"):
        probe_folder.checked_file(folder, manifest["export"]["graph"], "me")


# ------------------------------------------------------------ trust rule
@pytest.mark.parametrize(
    "name, trusted",
    [
        ("skloes.selection._loes._estimators.LOESSelector", True),
        ("skloes.probe._concatenation.SelectedLayerConcatenation", True),
        ("skloes.probe._fusion.SelectedLayerFusion", True),  # deprecated, 0.3
        ("skloes.heads._scalar_mix.ScalarMixClassifier", True),
        ("skloes.probe._persistence.save_probe", False),  # a function
        ("skloes.probe._export.write_export_files", False),
        ("skloes.serving.load_exported", False),
        ("skloes.report._layer_report.LayerReport", False),  # not a saved type
        ("skloes.cli._main.main", False),
        ("skloes.probe_folder.target_problem", False),
        ("os.system", False),
        ("skloes.selection.nothing.Thing", False),
    ],
)
def test_one_trust_rule_for_every_saved_estimator_and_head(name, trusted):
    assert probe_folder.is_skloes_estimator(name) is trusted
    if trusted:
        assert probe_folder.allowed_types([name], None, "me") == [name]
    else:
        with pytest.raises(ValueError, match=rf"not trusted: \['{re.escape(name)}'\]"):
            probe_folder.allowed_types([name], None, "me")
        assert probe_folder.allowed_types([name], [name], "me") == [name]


# ------------------------------------------------- what a save may replace
def test_an_edited_recorded_file_stops_a_save_naming_it(tmp_path):
    folder, _ = _saved(tmp_path / "p")
    assert probe_folder.target_problem(folder, overwrite=True, replace_hint="x") is None
    (folder / probe_folder.CARD).write_text("# my notes on this probe\n")
    assert probe_folder.changed_files(folder) == [probe_folder.CARD]
    problem = probe_folder.target_problem(folder, overwrite=True, replace_hint="x")
    assert "README.md changed since the save wrote it" in problem


def test_a_legacy_folder_without_hashes_counts_its_card_as_changed(tmp_path):
    # without hashes an edited card cannot be told from the saved one: it is
    # kept (a save refuses the folder, and never deletes it), issue 42
    folder, manifest = _saved(tmp_path / "p")
    del manifest["sha256"]
    probe_folder.write_manifest(folder, manifest)
    (folder / probe_folder.CARD).write_text("edited")
    assert probe_folder.changed_files(folder) == [probe_folder.CARD]
    problem = probe_folder.target_problem(
        folder, overwrite=True, replace_hint="overwrite"
    )
    assert "earlier skloes" in problem and "README.md" in problem


def test_removing_a_swapped_out_probe_keeps_what_the_save_did_not_write(tmp_path):
    folder, _ = _saved(tmp_path / "p")
    (folder / probe_folder.CARD).write_text("edited meanwhile")
    (folder / "late.txt").write_text("mine")
    with pytest.warns(UserWarning, match="they are kept in"):
        probe_folder.remove_saved_files(folder, tmp_path / "target", "me")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "late.txt"]


def test_the_state_a_save_compares_is_the_manifest(tmp_path):
    assert probe_folder.folder_state(tmp_path / "none") is None
    folder, _ = _saved(tmp_path / "p")
    before = probe_folder.folder_state(folder)
    assert before == (folder / probe_folder.MANIFEST).read_bytes()
    _saved(folder, model="org/other")
    assert probe_folder.folder_state(folder) != before


def test_the_manifest_is_the_json_a_reader_expects(tmp_path):
    folder, manifest = _saved(tmp_path / "p")
    text = (folder / probe_folder.MANIFEST).read_text()
    assert text.endswith("\n") and json.loads(text) == manifest
