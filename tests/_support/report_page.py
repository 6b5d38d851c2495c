"""Reading a report page back: its numbers, by the files they come from."""

from __future__ import annotations

import csv
import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest

from skloes.report import LayerReport


def fit_report(n_layers=4, n_samples=60, extra_metrics=None, **params):
    """A fitted report on planted layers (the class signal grows with depth)."""
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], n_samples // 2)
    H = rng.normal(size=(n_layers, n_samples, 3))
    for layer in range(n_layers):
        H[layer, :, 0] += 2.0 * layer / max(n_layers - 1, 1) * y
    params = {"n_layers_to_select": 2, "metrics": ("isotropy",), **params}
    return LayerReport(random_state=0, **params).fit(H, y, extra_metrics=extra_metrics)


class PageNumbers(HTMLParser):
    """Every element of a page that carries a file's value, with its text:
    ``cells[(layer, column)]`` (``layers.csv``), ``values[path]``
    (``selection.json``), and the page's scripts, styles and links."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells, self.values, self.scripts, self.styles = {}, {}, [], []
        self.urls, self._open, self._layer, self._in = [], [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.urls.append(a[key])
        if tag == "tr" and "data-layer" in a:
            self._layer = int(a["data-layer"])
        if tag in ("script", "style"):
            self._in = [tag, ""]
        self._open.append([tag, a, ""])

    def handle_endtag(self, tag):
        if self._in and self._in[0] == tag:
            (self.scripts if tag == "script" else self.styles).append(self._in[1])
            self._in = None
        while self._open:
            name, a, text = self._open.pop()
            if self._open:
                self._open[-1][2] += text
            if "data-json" in a:
                self.values.setdefault(a["data-json"], []).append(
                    (a["data-value"], text.strip())
                )
            if "data-col" in a and "data-value" in a and tag == "td":
                self.cells[(self._layer, a["data-col"])] = (a["data-value"], text)
            if name == tag:
                break

    def handle_data(self, data):
        if self._in:
            self._in[1] += data
        elif self._open:
            self._open[-1][2] += data


def parse_page(html):
    parser = PageNumbers()
    parser.feed(html)
    parser.close()
    return parser


def read_folder(folder):
    with open(folder / "layers.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    summary = json.loads((folder / "selection.json").read_text())
    return rows, summary


def resolve(summary, path):
    node = summary
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def numeric_leaves(node, path=""):
    """Paths of every number (not a bool) in a JSON value."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from numeric_leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numeric_leaves(v, f"{path}.{i}")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def shown(value):
    """How the page rounds a number (the text report's rounding)."""
    from skloes.report._html import _text

    return _text(value)


def assert_page_matches_files(html, folder_rows, summary):
    """Every number the page carries is the files' value, shown as the text
    report rounds it; every row and column of layers.csv and every number of
    selection.json is on the page."""
    page = parse_page(html)
    assert len({layer for layer, _ in page.cells}) == len(folder_rows)
    for row in folder_rows:
        layer = int(row["layer"])
        for col, raw in row.items():
            value, text = page.cells[(layer, col)]
            assert value == raw, (layer, col)
            if col not in ("layer", "selected"):
                assert text == shown(float(raw)), (layer, col)
    for path, found in page.values.items():
        expected = resolve(summary, path)
        for value, text in found:
            assert same(json.loads(value), expected), path
            if isinstance(expected, float):
                assert text == shown(expected), path
    covered = set(page.values)
    missing = [
        p
        for p in numeric_leaves(summary)
        if not any(p == c or p.startswith(c + ".") for c in covered)
    ]
    assert not missing, missing
    return page


def chromium():
    """The system Chromium for Playwright, or skip saying what is missing."""
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no system Chromium (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    return path


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
