"""The report page (skloes.report._html): its numbers are the files', every
string escaped, nothing fetched, scoped styles, the notebook display."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from _support.report_page import (
    assert_page_matches_files,
    fit_report,
    parse_page,
    read_folder,
)
from sklearn import config_context

from skloes.report._html import notebook_html, report_page
from skloes.report._presenting import REPORT_FILES

HOSTILE = "<script>alert('x')</script> & \"quotes\""


@pytest.fixture(scope="module")
def report():
    return fit_report(extra_metrics={"<i>odd</i> & metric": [0.1, np.nan, 0.3, 0.4]})


@pytest.fixture(scope="module")
def folder(report, tmp_path_factory):
    pytest.importorskip("matplotlib")
    out = tmp_path_factory.mktemp("report")
    return report.save(out, about={"data": HOSTILE, "model": "tiny <model>"})


def test_the_page_is_written_beside_the_other_files(folder):
    assert (folder / "report.html").is_file()
    assert sorted(p.name for p in folder.iterdir()) == sorted(REPORT_FILES[:4])
    assert REPORT_FILES[0] == "report.html"


def test_every_number_on_the_page_is_the_one_in_the_files(folder):
    rows, summary = read_folder(folder)
    html = (folder / "report.html").read_text(encoding="utf-8")
    page = assert_page_matches_files(html, rows, summary)
    # a metric undefined on a layer is NaN in the CSV and "-" on the page
    value, text = page.cells[(1, "<i>odd</i> & metric")]
    assert value == "nan" and text == "-"
    # the recommendation and the per-fold scores are there, by their paths
    assert "recommendation.score" in page.values
    assert "methods.0.fold_scores.0" in page.values


def test_a_wrong_number_on_the_page_is_caught(folder):
    """The check above is not vacuous: one changed digit fails it."""
    rows, summary = read_folder(folder)
    html = (folder / "report.html").read_text(encoding="utf-8")
    score = summary["recommendation"]["score"]
    summary["recommendation"]["score"] = score + 0.5
    with pytest.raises(AssertionError):
        assert_page_matches_files(html, rows, summary)
    summary["recommendation"]["score"] = score
    rows[0]["probe_score"] = "0.123"
    with pytest.raises(AssertionError):
        assert_page_matches_files(html, rows, summary)


def test_every_user_string_is_escaped(folder):
    html = (folder / "report.html").read_text(encoding="utf-8")
    page = parse_page(html)
    assert len(page.scripts) == 1 and "alert" not in page.scripts[0]
    assert "<i>odd</i>" not in html and "tiny <model>" not in html
    assert "&lt;i&gt;odd&lt;/i&gt; &amp; metric" in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "tiny &lt;model&gt;" in html


def test_nothing_is_fetched(folder):
    html = (folder / "report.html").read_text(encoding="utf-8")
    page = parse_page(html)
    assert page.urls == []  # no src, no href: no stylesheet, script or image
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, a name
    assert "@import" not in html and "url(" not in html


def test_the_styles_are_scoped_to_the_report(report):
    css = parse_page(notebook_html(report)).styles
    assert len(css) == 1
    body = re.sub(r"@media[^{]*\{", "", css[0])
    selectors = [s.strip() for s in re.findall(r"([^{}]+)\{[^{}]*\}", body)]
    assert selectors
    for group in selectors:
        for selector in group.split(","):
            assert selector.strip().startswith(".skloes-report"), selector


def test_the_styles_and_the_script_are_the_package_data_files(report):
    """The page inlines ``_static/report.css`` and ``report.js`` whole, as
    the installed package holds them (package data, not Python strings)."""
    from importlib.resources import files

    static = files("skloes.report") / "_static"
    css = (static / "report.css").read_text(encoding="utf-8")
    js = (static / "report.js").read_text(encoding="utf-8")
    assert ".skloes-report{" in css and "function skloesReport(root)" in js
    for html in (report_page(report), notebook_html(report)):
        assert css in html and js in html


def test_light_and_dark_themes(report):
    html = report_page(report)
    assert "@media (prefers-color-scheme: dark)" in html
    assert '<meta name="color-scheme" content="light dark">' in html


def test_the_notebook_display_carries_the_page_and_the_text_report(report):
    bundle = report._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert report.format_summary() in bundle["text/plain"]
    assert report.format_table() in bundle["text/plain"]
    html = bundle["text/html"]
    assert "attachShadow" in html and 'class="skloes-report"' in html
    # the same numbers as the page, by the same paths
    assert parse_page(html).values == parse_page(report_page(report)).values
    assert parse_page(html).cells == parse_page(report_page(report)).cells
    assert parse_page(report._repr_html_()).values == parse_page(html).values
    # two displays in one notebook do not share ids (their switches, hosts)
    ids = lambda h: set(re.findall(r'id="([^"]+)"', h))  # noqa: E731
    assert not ids(html) & ids(report._repr_mimebundle_()["text/html"])


def test_display_text_gives_text_only_and_an_unfitted_report_its_parameters():
    from skloes.report import LayerReport

    unfitted = LayerReport(n_layers_to_select=3)._repr_mimebundle_()
    assert "skloes-report" not in unfitted["text/html"]
    assert "n_layers_to_select=3" in unfitted["text/plain"]
    with config_context(display="text"):
        bundle = fit_report()._repr_mimebundle_()
    assert list(bundle) == ["text/plain"]


def test_a_report_of_31_layers_is_under_2_mb():
    """SmolLM2 has 31 hidden states: the page of such a report stays small."""
    report = fit_report(
        n_layers=31,
        n_samples=40,
        cv=3,
        fusion="average",
        metrics=("isotropy", "erank_sigma", "dataset_entropy"),
    )
    html = report_page(report, about={"data": "synthetic", "model": "31 layers"})
    size = len(html.encode("utf-8"))
    assert size < 2_000_000, size
    page = parse_page(html)
    assert {layer for layer, _ in page.cells} == set(range(31))
    assert html.count('class="hit"') == 31


def test_about_must_be_a_mapping(report, tmp_path):
    with pytest.raises(TypeError, match="`about` must be a dict"):
        report.save(tmp_path / "x", about=["data"])
    assert not (tmp_path / "x").exists()  # refused before anything is written


def test_to_html_is_the_page_written(folder, report):
    about = {"data": HOSTILE, "model": "tiny <model>"}
    assert report.to_html(about) == (folder / "report.html").read_text("utf-8")


@pytest.mark.integration
def test_a_report_of_the_real_minilm_on_real_texts(minilm_report, tmp_path):
    pytest.importorskip("matplotlib")
    about = {"data": "rotten_tomatoes, 120 texts", "model": "all-MiniLM-L6-v2"}
    folder = minilm_report.save(tmp_path / "minilm", about=about)
    rows, summary = read_folder(folder)
    assert len(rows) == 7  # the embedding output and 6 blocks
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert_page_matches_files(html, rows, summary)
    assert "all-MiniLM-L6-v2" in html
    assert json.loads(json.dumps(minilm_report.summary())) == summary
