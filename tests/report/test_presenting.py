"""Presenting a fitted report (skloes.report._presenting): the recommendation in
words, the tables and the report folder, read from public attributes only."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from skloes.report import LayerReport
from skloes.report._folder import write_report
from skloes.report._presenting import (
    REPORT_FILES,
    format_summary,
    format_table,
    has_budget_curve,
    layer_columns,
    recommendation_text,
)


@pytest.fixture(scope="module")
def report():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 30)
    H = rng.normal(size=(4, 60, 3))
    H[3, :, 0] += 2 * y
    return LayerReport(n_layers_to_select=2, metrics=("isotropy",), random_state=0).fit(
        H, y
    )


REC = {
    "method": "last_layer",
    "layers": [6],
    "score": 0.81,
    "n_layers_kept": 1,
    "deepest_layer": 6,
    "best_method": "loes",
    "best_score": 0.82,
    "difference": -0.01,
    "difference_se": 0.02,
    "within_noise": ["loes", "last_layer"],
}


def test_a_cheaper_answer_is_said_to_be_within_noise_of_the_best():
    text = recommendation_text(REC, 5)
    assert text.startswith("recommended: last_layer (1 layer kept, deepest block 6)")
    assert "within noise of the best, loes 0.8200 (difference -0.0100 ± 0.0200)" in text
    assert text.endswith("over the same 5 folds")


def test_the_best_answer_names_the_others_within_noise():
    best = {**REC, "method": "loes", "n_layers_kept": 2, "best_method": "loes"}
    assert "(2 layers kept" in recommendation_text(best, 3)
    assert "also within noise: last_layer" in recommendation_text(best, 3)
    alone = {**best, "within_noise": ["loes"]}
    assert "no cheaper answer is within noise" in recommendation_text(alone, 3)


def test_the_layer_table_has_a_row_per_layer_and_its_columns(report):
    cols = layer_columns(report)
    assert list(cols)[:4] == ["layer", "probe_score", "probe_score_std", "selected"]
    assert "isotropy" in cols and "selection_frequency" in cols
    lines = format_table(report).splitlines()
    assert len(lines) == 5 and lines[0].split()[0] == "layer"
    assert lines[1].split()[0] == "0"
    assert "*" in format_table(report)  # the selected layers are marked


def test_the_summary_quotes_every_method_and_the_recommendation(report):
    text = format_summary(report)
    for entry in report.comparison_.methods:
        assert f"{entry.score:.4f}" in text and entry.method in text
    assert recommendation_text(report.recommendation_, report.n_splits_) in text
    assert "LOES layers per fold:" in text and "selection stability" in text


def test_the_report_folder_holds_its_files_and_nothing_else(report, tmp_path):
    pytest.importorskip("matplotlib")
    folder = write_report(report, tmp_path / "out")
    assert not has_budget_curve(report)
    assert sorted(p.name for p in folder.iterdir()) == sorted(REPORT_FILES[:4])
    with open(folder / "layers.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["layer"]) for r in rows] == [0, 1, 2, 3]
    assert json.loads((folder / "selection.json").read_text()) == json.loads(
        json.dumps(report.summary())
    )
