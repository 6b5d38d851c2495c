"""The ``skloes probe`` command: the default job, data files and user errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from skloes.cli import build_parser, main


def _one_line_error(capsys, status, needle):
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1, err
    assert err[0].startswith("skloes probe: error:") and needle in err[0]
    assert "Traceback" not in err[0]


def _write_csv(path, texts, labels, text_col="review", label_col="stars"):
    import pandas as pd

    pd.DataFrame({text_col: texts, label_col: labels}).to_csv(path, index=False)
    return path


def test_parser_defaults():
    args = build_parser().parse_args(["probe"])
    assert (args.model, args.data, args.pooling, args.n_layers_to_select, args.out) == (
        None, "rotten_tomatoes", "mean", 4, "skloes_report"
    )
    args = build_parser().parse_args(["probe", "--n-layers-to-select", "auto"])
    assert args.n_layers_to_select == "auto"
    args = build_parser().parse_args(["probe", "--max-samples", "all"])
    assert args.max_samples is None


@pytest.mark.integration
def test_default_job_on_a_reduced_sample(tmp_path, capsys, minilm_path,
                                         rotten_tomatoes_small):
    out = tmp_path / "report"
    start = time.perf_counter()
    status = main(["probe", "--max-samples", "200", "--out", str(out)])
    elapsed = time.perf_counter() - start
    assert status == 0
    stdout = capsys.readouterr().out
    assert "Per-layer table" in stdout and "Selection summary" in stdout
    for method in ("loes", "last_layer", "best_single_layer", "last_k", "all_layers"):
        assert method in stdout
    payload = json.loads((out / "selection.json").read_text())
    assert payload["n_layers"] == 7 and len(payload["selected_layers"]) == 4
    assert (out / "layers.csv").read_text().count("\n") == 8  # header + 7 layers
    assert (out / "profile.png").stat().st_size > 10_000
    assert elapsed < 120  # about 30 s on 2 idle cores; generous for shared CI


@pytest.mark.torch
def test_data_file_custom_columns_and_token_metrics(tmp_path, capsys,
                                                    tiny_model_path):
    rng = np.random.RandomState(0)
    words = "the a good bad great awful movie film plot actor story fun dull".split()
    texts = [" ".join(rng.choice(words, size=rng.randint(3, 9))) for _ in range(40)]
    labels = ["pos", "neg"] * 20
    path = _write_csv(tmp_path / "reviews.csv", texts, labels)
    out = tmp_path / "out"
    status = main(["probe", "--model", tiny_model_path, "--data", str(path),
                   "--text-column", "review", "--label-column", "stars",
                   "--n-layers-to-select", "2",
                   "--token-metrics", "--out", str(out), "--device", "cpu"])
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
    _one_line_error(capsys, main(["probe", "--data", str(path)]),
                    "--text-column 'text' is not a column")
    status = main(["probe", "--data", str(path), "--text-column", "review",
                   "--label-column", "stars"])
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
    status = main(["probe", "--data", str(path), "--text-column", "review",
                   "--label-column", "stars", "--model", str(empty)])
    _one_line_error(capsys, status, "has no config.json")
    status = main(["probe", "--data", str(path), "--text-column", "review",
                   "--label-column", "stars", "--model", str(tmp_path / "nowhere")])
    _one_line_error(capsys, status, "does not exist")
    (empty / "config.json").write_text("{not json")
    status = main(["probe", "--data", str(path), "--text-column", "review",
                   "--label-column", "stars", "--model", str(empty)])
    _one_line_error(capsys, status, "not_a_model")


def test_python_dash_m_reports_errors_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "skloes", "probe", "--data", str(tmp_path / "x.jsonl")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr
