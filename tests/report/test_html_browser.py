"""The report page and its notebook display in a real browser: the system's
headless Chromium driven by Playwright (skipped, with the reason, where
either is absent; CI installs both)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from _support.report_page import CHROMIUM_ARGS, chromium, fit_report

from skloes.report._html import notebook_html


@pytest.fixture(scope="module")
def browser():
    path = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report():
    return fit_report(n_layers=6, metrics=("isotropy", "erank_sigma"))


@pytest.fixture(scope="module")
def page_file(report, tmp_path_factory):
    pytest.importorskip("matplotlib")
    folder = report.save(tmp_path_factory.mktemp("page"), about={"data": "planted"})
    return folder / "report.html"


def _open(browser, url, **context):
    ctx = browser.new_context(viewport={"width": 1000, "height": 900}, **context)
    page = ctx.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "request", lambda r: errors.append(f"fetched {r.url}") if r.url != url else None
    )
    page.goto(url)
    return page, errors


def _layer_order(page):
    return [
        int(v)
        for v in page.eval_on_selector_all(
            "table.layers tbody tr", "rows => rows.map(r => r.dataset.layer)"
        )
    ]


def _column(page, col):
    return page.eval_on_selector_all(
        f'table.layers tbody td[data-col="{col}"]',
        "cells => cells.map(c => parseFloat(c.dataset.value))",
    )


def _pixels(png):
    from matplotlib.image import imread

    return imread(io.BytesIO(png), format="png")[..., :3]


def test_the_page_opens_from_disk_with_every_layer_and_no_error(browser, page_file):
    page, errors = _open(browser, page_file.as_uri())
    for i in range(6):
        assert page.locator(f'table.layers tr[data-layer="{i}"]').count() == 1
        assert page.locator(f'circle.mark[data-layer="{i}"]').is_visible()
        assert page.locator(f'rect.hit[data-layer="{i}"]').count() == 1
    assert page.locator("circle.mark.sel").count() == 2  # the LOES layers
    assert errors == []
    page.context.close()


def test_the_layer_table_sorts_by_a_column(browser, page_file, report):
    page, errors = _open(browser, page_file.as_uri())
    header = page.locator('table.layers th[data-col="probe_score"] button')
    header.click()
    scores = _column(page, "probe_score")
    assert scores == sorted(scores)
    assert page.get_attribute('th[data-col="probe_score"]', "aria-sort") == "ascending"
    header.click()
    assert _column(page, "probe_score") == sorted(scores, reverse=True)
    assert _layer_order(page) == list(np.argsort(-report.probe_scores_, kind="stable"))
    page.locator('table.layers th[data-col="layer"] button').click()
    assert _layer_order(page) == list(range(6))
    assert errors == []
    page.context.close()


def test_hovering_a_layer_shows_its_numbers(browser, page_file, report):
    page, errors = _open(browser, page_file.as_uri())
    tip = page.locator(".tip")
    assert not tip.is_visible()
    page.hover('rect.hit[data-layer="4"]')
    assert tip.is_visible()
    text = tip.inner_text()
    assert "layer 4" in text
    row = page.locator('table.layers tr[data-layer="4"]')
    for col in ("probe_score", "probe_score_std", "isotropy", "erank_sigma"):
        cell = row.locator(f'td[data-col="{col}"]').inner_text()
        assert f"{col}: {cell}" in text
    assert "hl" in row.get_attribute("class")
    page.mouse.move(5, 5)
    assert not tip.is_visible()
    assert errors == []
    page.context.close()


def test_each_series_and_metric_switches_in_the_profile(browser, page_file):
    page, _ = _open(browser, page_file.as_uri())
    first, second = page.locator("g.mk0"), page.locator("g.mk1")
    assert first.is_visible() and not second.is_visible()
    page.click('label:has-text("erank_sigma")')
    assert second.is_visible() and not first.is_visible()
    assert page.locator("polygon.band").is_visible()
    page.click('label:has-text("fold spread")')
    assert not page.locator("polygon.band").is_visible()
    page.click('label:has-text("picked by the folds")')
    assert not page.locator("g.freq").is_visible()
    page.context.close()


def test_without_javascript_the_tables_remain(browser, page_file):
    page, _ = _open(browser, page_file.as_uri(), java_script_enabled=False)
    assert page.locator("table.layers tbody tr").count() == 6
    assert page.locator("table.methods tbody tr").count() == 5
    assert page.locator("table.folds tbody tr").count() == 5
    assert page.locator("table.layers th button").count() == 0  # no sorting
    assert page.locator("table.layers").is_visible()
    # the metric switch is CSS: it works without scripts too
    page.click('label:has-text("erank_sigma")')
    assert page.locator("g.mk1").is_visible()
    page.context.close()


def test_a_screenshot_is_not_blank_in_either_theme(browser, page_file):
    shots = {}
    for scheme in ("light", "dark"):
        page, errors = _open(browser, page_file.as_uri(), color_scheme=scheme)
        pixels = _pixels(page.screenshot(full_page=True))
        assert pixels.std() > 0.05, scheme  # not one flat colour
        shots[scheme] = pixels[5, 5].mean()  # the background
        assert errors == []
        page.context.close()
    assert shots["light"] > 0.9 and shots["dark"] < 0.2


_NOTEBOOK = """<!DOCTYPE html><html><head><style>
* {{ color: rgb(255, 0, 0) !important; font-size: 40px !important; }}
table {{ display: none !important; }}
</style></head><body><p id="cell">a notebook cell</p>
<table class="layers"><tbody><tr><td id="theirs">theirs</td></tr></tbody></table>
{report}</body></html>"""


def test_the_notebook_display_neither_takes_nor_leaks_styles(browser, report, tmp_path):
    path = tmp_path / "notebook.html"
    path.write_text(_NOTEBOOK.format(report=notebook_html(report)), encoding="utf-8")
    page, errors = _open(browser, path.as_uri())
    host = page.locator(".skloes-report-host")
    assert page.evaluate(
        "document.querySelector('.skloes-report-host').shadowRoot !== null"
    )
    # Playwright's locators pierce open shadow roots
    table = host.locator("table.layers")
    assert table.is_visible()  # the notebook's `table {display: none}` stays out
    color = host.locator("h1").evaluate("e => getComputedStyle(e).color")
    assert color != "rgb(255, 0, 0)"
    # and the report's styles stay in: the notebook's own table keeps its rule
    assert not page.locator("#theirs").is_visible()
    assert page.locator("#cell").evaluate("e => getComputedStyle(e).fontSize") == "40px"
    host.locator('th[data-col="probe_score"] button').click()  # wired in the shadow
    scores = host.locator('td[data-col="probe_score"]').evaluate_all(
        "cells => cells.map(c => parseFloat(c.dataset.value))"
    )
    assert scores == sorted(scores)
    host.locator('rect.hit[data-layer="2"]').hover()
    assert "layer 2" in host.locator(".tip").inner_text()
    assert errors == []
    page.context.close()


def test_the_notebook_display_without_scripts_shows_the_tables(
    browser, report, tmp_path
):
    path = tmp_path / "static.html"
    body = f"<!DOCTYPE html><html><body><p id='cell'>cell</p>{notebook_html(report)}"
    path.write_text(body + "</body></html>", encoding="utf-8")
    page, _ = _open(browser, path.as_uri(), java_script_enabled=False)
    assert page.locator(".skloes-report table.layers tbody tr").count() == 6
    assert page.locator(".skloes-report table.layers").is_visible()
    # its scoped styles leave the page's own elements alone
    own = page.locator("#cell").evaluate("e => getComputedStyle(e).fontSize")
    assert own == "16px"
    page.context.close()


@pytest.mark.integration
def test_the_page_of_a_real_minilm_report(browser, minilm_report, tmp_path):
    pytest.importorskip("matplotlib")
    folder = minilm_report.save(tmp_path, about={"model": "all-MiniLM-L6-v2"})
    page, errors = _open(browser, (folder / "report.html").as_uri())
    assert page.locator("table.layers tbody tr").count() == 7
    assert page.locator("circle.mark").count() == 7
    page.hover('rect.hit[data-layer="6"]')
    assert "layer 6" in page.locator(".tip").inner_text()
    assert _pixels(page.screenshot()).std() > 0.05
    assert errors == []
    page.context.close()


# --------------------------------------------------------------------------
# New in issue 55: the page and the notebook display stay inert whatever the
# user's strings (class labels, metric names, data and model names, about):
# nothing of a payload runs, and no request leaves the page.
# --------------------------------------------------------------------------
def _payloads(leak):
    """Strings that would run code or fetch ``leak`` if written as markup."""
    run = "window.__pwned=(window.__pwned||0)+1"
    return [
        f"<script>{run}</script>",
        f"<img src=x onerror='{run}'>",
        f'"><svg onload="{run}">',
        f"</script><script>{run}</script>",
        f"</style><script>{run}</script><style>",
        f'<iframe src="javascript:parent.{run.split("=")[0]}=1"></iframe>',
        f'<img src="{leak}/img">',
        f'<link rel=stylesheet href="{leak}/css">',
        f"<style>@import '{leak}/import';</style>",
        f"javascript:{run}",
        f"{{{{constructor.constructor('{run}')()}}}}",
        "${" + run + "}",
        f"<template><script>{run}</script></template>",
        f'<a href="{leak}/a" id="leak">click</a>',
    ]


LEAK = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def hostile_report():
    """A report whose every user string is a payload: labels, metric names."""
    from skloes.report import LayerReport

    payloads = _payloads(LEAK)
    rng = np.random.RandomState(0)
    y = np.asarray([payloads[0], payloads[1]])[np.repeat([0, 1], 30)]
    H = rng.normal(size=(4, 60, 3))
    H[3, :, 0] += 2.0 * (y == payloads[1])
    extra = {p: np.arange(4.0) + i for i, p in enumerate(payloads[2:])}
    report = LayerReport(n_layers_to_select=2, metrics=("isotropy",), random_state=0)
    return report.fit(H, y, extra_metrics=extra)


def _hostile_about():
    payloads = _payloads(LEAK)
    about = {"data": payloads[0], "model": payloads[1], "seed": payloads[3]}
    about.update({f"k{i} {p}": p for i, p in enumerate(payloads)})
    return about


# Elements a payload would have made, in the page and in any shadow root.
_MADE = """() => {
  const roots = [document, ...[...document.querySelectorAll('*')]
    .filter(e => e.shadowRoot).map(e => e.shadowRoot)];
  const made = 'iframe, svg[onload], img[onerror], img[src], link[href], #leak';
  return roots.reduce((n, r) => n + r.querySelectorAll(made).length, 0);
}"""


def _assert_inert(page, errors):
    page.wait_for_timeout(300)  # let any onload/onerror fire
    assert page.evaluate("window.__pwned === undefined"), "a payload ran"
    assert page.evaluate(_MADE) == 0, "a payload became markup"
    assert not [e for e in errors if e.startswith("fetched")], errors


@pytest.mark.parametrize("scripts", [True, False], ids=["scripts", "no_scripts"])
def test_the_page_stays_inert_with_hostile_strings(
    browser, hostile_report, tmp_path, scripts
):
    pytest.importorskip("matplotlib")
    folder = hostile_report.save(tmp_path / "r", about=_hostile_about())
    page, errors = _open(
        browser, (folder / "report.html").as_uri(), java_script_enabled=scripts
    )
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    if scripts:  # the page's own scripts work on the payload names
        page.locator('th[data-col="probe_score"] button').click()
        page.locator('rect.hit[data-layer="2"]').hover()
        _assert_inert(page, errors)
        assert [e for e in errors if not e.startswith("fetched")] == []
    else:
        assert page.evaluate(_MADE) == 0, "a payload became markup"
        assert not [e for e in errors if e.startswith("fetched")], errors
    text = page.locator("body").inner_text()
    for payload in _payloads(LEAK)[:3]:  # shown as text, as given
        assert payload in text
    assert page.locator("#leak").count() == 0 and dialogs == []
    page.context.close()


def test_the_notebook_display_stays_inert_with_hostile_strings(
    browser, hostile_report, tmp_path
):
    path = tmp_path / "notebook.html"
    cell = notebook_html(hostile_report)
    body = f"<!DOCTYPE html><html><body><p id='cell'>cell</p>{cell}</body></html>"
    path.write_text(body, encoding="utf-8")
    page, errors = _open(browser, path.as_uri())
    host = page.locator(".skloes-report-host")
    host.locator('th[data-col="probe_score"] button').click()
    host.locator('rect.hit[data-layer="1"]').hover()
    _assert_inert(page, errors)
    assert [e for e in errors if not e.startswith("fetched")] == []
    shown = host.locator("table.layers").inner_text()  # pierces the shadow root
    assert _payloads(LEAK)[2] in shown  # a metric's name, as text
    page.context.close()
