"""The report as one self-contained HTML page, and its notebook display.

:func:`report_page` renders a fitted :class:`~skloes.report.LayerReport` as a
standalone page (``report.html`` of a report folder): inline CSS, inline SVG
written here (no plotting library), a small hand-written script, nothing
fetched. :func:`notebook_html` renders the same content for a notebook cell,
moved into a shadow DOM by its script so that the notebook's styles and the
report's do not meet; without scripts the same markup shows, its styles
scoped under its own class. (A fitted probe's display, its layers and
fusion below scikit-learn's estimator display, is the probe's own:
``skloes.probe._estimators``.)

Like :mod:`skloes.report._presenting`, it reads the report's public
attributes and computes nothing of its own: every number on the page is the
one of ``layers.csv`` (:func:`~skloes.report._presenting.layer_columns`) or
``selection.json`` (``LayerReport.summary()``), carried on its element as
``data-value`` (the file's exact value) beside the shown, rounded text
(``data-col`` names the CSV column, ``data-json`` the path in the JSON, dots
between keys and list positions). Every string comes out HTML-escaped.
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from html import escape

import numpy as np

import skloes.report._presenting as _presenting

__all__ = ["check_about", "notebook_html", "report_page"]

_W, _LEFT, _RIGHT = 760, 58, 46  # the profile's width and side margins (px)
_TOP_H, _BOTTOM_H, _GAP, _AXIS = 230, 140, 26, 34  # panel heights, gaps


def check_about(about, owner="LayerReport.save"):
    """``about`` as a dict of str to str (what a report was made from).

    Parameters
    ----------
    about : mapping of str to object or None
        Shown on the page as given (as text).
    owner : str
        Names the caller in the error.

    Returns
    -------
    about : dict of str to str
    """
    if about is None:
        return {}
    if not isinstance(about, Mapping) or not all(isinstance(k, str) for k in about):
        raise TypeError(
            f"{owner}: `about` must be a dict of str to values shown as text "
            f"(data, model, ...); got {type(about).__name__}."
        )
    about = {k: str(v) for k, v in about.items()}
    for key, value in about.items():
        try:
            (key + value).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{owner}: `about` entry {key!r} holds text that is not valid "
                "Unicode (a lone surrogate?); give it as valid text."
            ) from None
    return about


# ---------------------------------------------------------------- numbers
def _text(value):
    """A value as the page shows it: numbers as the text report rounds them."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _presenting._fmt(value, 0).strip()
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value) if value else "none"
    return str(value)


def _json(value):
    return json.dumps(value)


def _cell_value(value):
    """A ``layers.csv`` cell, as :func:`~skloes.report._folder.write_report`
    writes it."""
    return str(_presenting._csv_value(value))


def _val(path, value, text=None, tag="span", cls=""):
    """An element holding ``selection.json``'s value at ``path``."""
    shown = _text(value) if text is None else text
    klass = f' class="{cls}"' if cls else ""
    return (
        f'<{tag}{klass} data-json="{escape(path)}" '
        f'data-value="{escape(_json(value))}">{escape(shown)}</{tag}>'
    )


# ------------------------------------------------------------------ parts
def _header(report, summary, about):
    facts = [
        ("task", _val("task", summary["task"])),
        ("scoring", _val("scoring", summary["scoring"])),
        ("layers", _val("n_layers", summary["n_layers"])),
        ("folds", _val("n_splits", summary["n_splits"])),
        ("groups", _val("n_groups", summary["n_groups"])),
        ("nested", _val("nested", summary["nested"])),
        ("fusion", _val("fusion", summary["fusion"])),
    ]
    items = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    made = ""
    if about:
        rows = "".join(
            f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>"
            for k, v in about.items()
        )
        made = f'<dl class="facts about">{rows}</dl>'
    return (
        "<header><h1>Layer report</h1>"
        '<p class="sub">Every layer probed, measured and selected; layer 0 is '
        "the embedding output.</p>"
        f'{made}<dl class="facts">{items}</dl></header>'
    )


def _recommendation(report, summary):
    rec = summary["recommendation"]
    p = "recommendation."
    head = (
        f'<p class="rec-head">recommended: {_val(p + "method", rec["method"], tag="b")}'
        f" on layers {_val(p + 'layers', rec['layers'])}: "
        f"{_val(p + 'score', rec['score'], tag='b')} {escape(summary['scoring'])}, "
        f"{_val(p + 'n_layers_kept', rec['n_layers_kept'])} kept, deepest block "
        f"{_val(p + 'deepest_layer', rec['deepest_layer'])}</p>"
    )
    detail = [
        ("best method", _val(p + "best_method", rec["best_method"])),
        ("best score", _val(p + "best_score", rec["best_score"])),
        ("difference to the best", _val(p + "difference", rec["difference"])),
        ("its standard error", _val(p + "difference_se", rec["difference_se"])),
        ("within noise of the best", _val(p + "within_noise", rec["within_noise"])),
    ]
    items = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in detail)
    why = _presenting.recommendation_text(rec, summary["n_splits"])
    fusion = _presenting.fusion_text(
        summary["fusion"], summary["fusion_counts"], summary["task"] == "regression"
    )
    return (
        '<section class="rec"><h2>Recommendation</h2>'
        f'{head}<p class="why">{escape(why)}</p><dl class="facts">{items}</dl>'
        f'<p class="why">{escape(fusion)}</p></section>'
    )


def _methods_table(summary):
    rows = []
    for i, e in enumerate(summary["methods"]):
        p = f"methods.{i}."
        counts = summary["fusion_counts"].get(e["method"], {})
        fusion = (
            ", ".join(
                _val(f"fusion_counts.{e['method']}.{name}", n, f"{name} {n}")
                for name, n in counts.items()
            )
            or "-"
        )
        rows.append(
            f'<tr data-method="{escape(e["method"])}">'
            f"<th scope='row'>{_val(p + 'method', e['method'])}</th>"
            f"<td>{_val(p + 'layers', e['layers'])}</td>"
            f"<td class='n'>{_val(p + 'score', e['score'])}</td>"
            f"<td class='n'>{_val(p + 'score_std', e['score_std'])}</td>"
            f"<td class='n'>{len(e['layers'])}</td>"
            f"<td class='n'>{max(e['layers'])}</td><td>{fusion}</td></tr>"
        )
    s = summary
    top = [
        ("LOES layers", _val("selected_layers", s["selected_layers"])),
        ("in pick order", _val("selection_order", s["selection_order"])),
        ("LOES score", _val("fused_score", s["fused_score"])),
        ("last layer score", _val("last_layer_score", s["last_layer_score"])),
        ("best single layer", _val("best_layer", s["best_layer"])),
        ("its score", _val("best_layer_score", s["best_layer_score"])),
        ("profile's best layer", _val("profile_best_layer", s["profile_best_layer"])),
        (
            "its score (optimistic)",
            _val("profile_best_layer_score", s["profile_best_layer_score"]),
        ),
    ]
    facts = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in top)
    how = "inside each CV fold" if s["nested"] else "on all rows, scored by CV"
    return (
        f'<section><h2>Selection summary</h2><p class="sub">Layers selected {how}; '
        "every method scored with the same probe on the same folds.</p>"
        f'<dl class="facts">{facts}</dl>'
        '<div class="scroll"><table class="methods"><thead><tr><th>method</th>'
        f"<th>layers</th><th>{escape(s['scoring'])} (CV)</th><th>± std</th>"
        "<th>kept</th><th>deepest</th><th>fusion (folds)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _folds_table(summary):
    n = summary["n_splits"]
    head = "".join(f"<th>fold {j + 1}</th>" for j in range(n))
    rows = []
    for i, e in enumerate(summary["methods"]):
        cells = []
        for j in range(n):
            p = f"methods.{i}."
            parts = [_val(f"{p}fold_scores.{j}", e["fold_scores"][j], cls="fs")]
            if e.get("fold_layers") is not None:
                parts.append(
                    "layers " + _val(f"{p}fold_layers.{j}", e["fold_layers"][j])
                )
            if e.get("fold_fusions") is not None and e["fold_fusions"][j]:
                parts.append(_val(f"{p}fold_fusions.{j}", e["fold_fusions"][j]))
            cells.append(f"<td>{'<br>'.join(parts)}</td>")
        rows.append(
            f"<tr><th scope='row'>{escape(e['method'])}</th>{''.join(cells)}</tr>"
        )
    stability = ""
    if summary["fold_selections"] is not None:
        picks = " | ".join(
            _val(f"fold_selections.{j}", f)
            for j, f in enumerate(summary["fold_selections"])
        )
        stab = summary["selection_stability"]
        stability = (
            f"<p>LOES layers per fold: {picks}</p><p>selection stability "
            f"{_val('selection_stability', stab)} (Nogueira et al. 2018; 1 = the "
            "same layers in every fold, 0 = chance)</p>"
        )
    return (
        "<section><h2>Folds</h2><p class='sub'>Each method's score, layers and "
        "fusion on each of the shared outer folds.</p>"
        f"{stability}<div class='scroll'><table class='folds'><thead><tr>"
        f"<th>method</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
        "</table></div></section>"
    )


def _layer_table(report, summary):
    cols = _presenting.layer_columns(report)
    names = list(cols)
    head = "".join(
        f'<th data-col="{escape(c)}" class="{"" if c == "layer" else "n"}">'
        f"{escape(c)}</th>"
        for c in names
    )
    freq = summary["selection_frequency"]
    rows = []
    for i, layer in enumerate(cols["layer"]):
        cells = []
        for c in names:
            v = cols[c][i]
            raw = _cell_value(v)
            attrs = f'data-col="{escape(c)}" data-value="{escape(raw)}"'
            if c == "selection_frequency" and freq is not None:
                attrs += f' data-json="selection_frequency.{i}"'
            if c == "selected":
                text = "\u2713" if v else ""
            elif c == "layer":
                text = str(int(v))
            else:
                text = _text(float(v))
            klass = "" if c == "layer" else ' class="n"'
            cells.append(f"<td{klass} {attrs}>{escape(text)}</td>")
        sel = ' class="sel"' if cols["selected"][i] else ""
        rows.append(f'<tr data-layer="{int(layer)}"{sel}>{"".join(cells)}</tr>')
    return (
        "<section><h2>Per layer</h2><p class='sub'>A description of the model, "
        "not a contest: its best row is the maximum of many CV scores, hence "
        "optimistic. Click a column's name to sort by it.</p>"
        "<div class='scroll'><table class='layers sortable'><thead><tr>"
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _settings(report):
    params = {
        k: v
        for k, v in report.get_params(deep=False).items()
        if not (isinstance(v, str) and v == "deprecated")
    }
    rows = "".join(
        f"<div><dt>{escape(k)}</dt><dd><code>{escape(repr(v))}</code></dd></div>"
        for k, v in params.items()
    )
    return (
        "<section><h2>Settings</h2><p class='sub'>The LayerReport parameters "
        f"this report was fitted with.</p><dl class='facts'>{rows}</dl></section>"
    )


# ---------------------------------------------------------------- the SVG
def _nice_ticks(lo, hi, n=4):
    if not np.isfinite(lo) or not np.isfinite(hi):
        return [0.0, 1.0]
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    step = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(step))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= step), default=step)
    start = math.ceil(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 12))
        t += step
    return ticks or [lo, hi]


def _tick_text(t):
    return f"{t:.3g}"


def _range(values, pad=0.06):
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.1
    return lo - pad * span, hi + pad * span


def _path(xs, ys):
    """An SVG path through the finite points, broken where a value is NaN."""
    parts, pen = [], "M"
    for x, y in zip(xs, ys, strict=True):
        if not np.isfinite(y):
            pen = "M"
            continue
        parts.append(f"{pen}{x:.1f},{y:.1f}")
        pen = "L"
    return " ".join(parts)


def _axis_y(x, top, height, lo, hi, side="left"):
    out = []
    for t in _nice_ticks(lo, hi):
        if not lo <= t <= hi:
            continue
        y = top + height - (t - lo) / (hi - lo) * height
        if side == "left":
            out.append(
                f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:.1f}" '
                f'y2="{y:.1f}"/><text class="tick" x="{x - 6}" y="{y + 3.5:.1f}" '
                f'text-anchor="end">{_tick_text(t)}</text>'
            )
        else:
            out.append(
                f'<text class="tick freq" x="{x + 6}" y="{y + 3.5:.1f}">'
                f"{_tick_text(t)}</text>"
            )
    return "".join(out)


def _frequency_bars(freq, xs, band, top):
    """How often the folds picked each layer, as bars on a 0..1 axis at right."""
    bars = "".join(
        f'<rect class="bar" x="{xs[i] - band * 0.35:.1f}" '
        f'y="{top + _TOP_H * (1 - f):.1f}" width="{band * 0.7:.1f}" '
        f'height="{_TOP_H * f:.1f}"/>'
        for i, f in enumerate(freq)
    )
    return (
        f'<g class="freq">{bars}{_axis_y(_W - _RIGHT, top, _TOP_H, 0, 1, "right")}'
        f'<text class="label freq" x="{_W - 8}" y="{top + _TOP_H / 2:.0f}" '
        f'transform="rotate(90 {_W - 8} {top + _TOP_H / 2:.0f})" '
        'text-anchor="middle">picked (fraction of folds)</text></g>'
    )


def _profile(report, uid):
    cols = _presenting.layer_columns(report)
    L = len(cols["layer"])
    band = (_W - _LEFT - _RIGHT) / L
    xs = [_LEFT + (i + 0.5) * band for i in range(L)]
    score, std = np.asarray(cols["probe_score"]), np.asarray(cols["probe_score_std"])
    lo, hi = _range(np.concatenate([score - std, score + std]))
    top = 12
    sy = lambda v: top + _TOP_H - (v - lo) / (hi - lo) * _TOP_H  # noqa: E731
    metrics = [c for c in report.metrics_]
    bottom_top = top + _TOP_H + _GAP
    height = bottom_top + (_BOTTOM_H + _GAP if metrics else 0) + _AXIS
    svg = [
        f'<svg class="profile-svg" viewBox="0 0 {_W} {height}" role="img" '
        f'aria-label="probe score and metrics against the layer" '
        f'xmlns="http://www.w3.org/2000/svg">',
        _axis_y(_LEFT, top, _TOP_H, lo, hi),
        f'<text class="label" x="14" y="{top + _TOP_H / 2:.0f}" '
        f'transform="rotate(-90 14 {top + _TOP_H / 2:.0f})" text-anchor="middle">'
        f"{escape(report.scoring_)} (CV)</text>",
    ]
    freq = cols.get("selection_frequency")
    if freq is not None:
        svg.append(_frequency_bars(freq, xs, band, top))
    upper = [f"{x:.1f},{sy(v):.1f}" for x, v in zip(xs, score + std, strict=True)]
    lower = [f"{x:.1f},{sy(v):.1f}" for x, v in zip(xs, score - std, strict=True)]
    svg.append(
        f'<polygon class="band" points="{" ".join(upper + lower[::-1])}"/>'
        f'<path class="score line" d="{_path(xs, [sy(v) for v in score])}"/>'
    )
    marks = []
    for i in range(L):
        klass = "mark sel" if cols["selected"][i] else "mark"
        marks.append(
            f'<circle class="{klass}" data-layer="{i}" cx="{xs[i]:.1f}" '
            f'cy="{sy(score[i]):.1f}" r="{5 if cols["selected"][i] else 3.2}"/>'
        )
    svg.append(f'<g class="score">{"".join(marks)}</g>')
    rec = report.recommendation_
    tri = "".join(  # the recommended method's layers, under the top panel
        f'<path class="rec" data-layer="{i}" d="M{xs[i]:.1f},{top + _TOP_H + 3:.1f} '
        f'l-5,9 h10 z"><title>recommended: {escape(rec.method)}</title></path>'
        for i in rec.layers
    )
    svg.append(tri)
    for j, name in enumerate(metrics):
        values = np.asarray(cols[name], dtype=float)
        mlo, mhi = _range(values)
        my = [
            bottom_top + _BOTTOM_H - (v - mlo) / (mhi - mlo) * _BOTTOM_H
            if np.isfinite(v)
            else np.nan
            for v in values
        ]
        dots = "".join(
            f'<circle class="mdot" data-layer="{i}" cx="{xs[i]:.1f}" cy="{y:.1f}" '
            'r="2.8"/>'
            for i, y in enumerate(my)
            if np.isfinite(y)
        )
        svg.append(
            f'<g class="metric mk{j}" data-metric="{escape(name)}">'
            f"{_axis_y(_LEFT, bottom_top, _BOTTOM_H, mlo, mhi)}"
            f'<path class="mline" d="{_path(xs, my)}"/>{dots}'
            f'<text class="label" x="14" y="{bottom_top + _BOTTOM_H / 2:.0f}" '
            f'transform="rotate(-90 14 {bottom_top + _BOTTOM_H / 2:.0f})" '
            f'text-anchor="middle">{escape(name)}</text></g>'
        )
    axis_y = height - _AXIS + 14
    step = max(1, math.ceil(L / 32))
    ticks = "".join(
        f'<text class="tick" x="{xs[i]:.1f}" y="{axis_y}" text-anchor="middle">{i}'
        "</text>"
        for i in range(0, L, step)
    )
    svg.append(
        f'{ticks}<text class="label" x="{(_LEFT + _W - _RIGHT) / 2:.0f}" '
        f'y="{height - 4}" text-anchor="middle">layer</text>'
    )
    svg.append(
        f'<rect class="hl-col" x="0" y="{top}" width="{band:.1f}" '
        f'height="{height - _AXIS - top}" visibility="hidden"/>'
    )
    for i in range(L):  # hover targets, with the numbers as a native tooltip
        tip = "; ".join(
            f"{c} "
            + (
                _cell_value(cols[c][i])
                if c in ("layer", "selected")
                else _text(float(cols[c][i]))
            )
            for c in cols
        )
        svg.append(
            f'<rect class="hit" data-layer="{i}" x="{xs[i] - band / 2:.1f}" '
            f'y="{top}" width="{band:.1f}" height="{height - _AXIS - top}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    svg.append("</svg>")
    controls = [
        f'<input type="checkbox" id="{uid}-sw-score" class="sw sw-score" checked>'
        f'<label for="{uid}-sw-score">probe score</label>',
        f'<input type="checkbox" id="{uid}-sw-band" class="sw sw-band" checked>'
        f'<label for="{uid}-sw-band">fold spread (± std)</label>',
    ]
    if freq is not None:
        controls.append(
            f'<input type="checkbox" id="{uid}-sw-freq" class="sw sw-freq" checked>'
            f'<label for="{uid}-sw-freq">picked by the folds</label>'
        )
    for j, name in enumerate(metrics):
        checked = " checked" if j == 0 else ""
        controls.append(
            f'<input type="radio" name="{uid}-metric" id="{uid}-sw-m{j}" '
            f'class="sw sw-m sw-m{j}" value="{escape(name)}"{checked}>'
            f'<label for="{uid}-sw-m{j}">{escape(name)}</label>'
        )
    css = "".join(
        f".skloes-report .sw-m{j}:checked ~ svg .mk{j}{{display:inline}}"
        for j in range(len(metrics))
    )
    legend = (
        "Probe score per layer with its spread over the folds (band); large "
        "marks: the LOES layers; triangles: the recommended method's layers"
        + ("; bars: how often the folds picked the layer" if freq is not None else "")
        + ("; below, the metric chosen above" if metrics else "")
        + ". Hover a layer for its numbers."
    )
    return (
        "<section><h2>Profile</h2>"
        f'<div class="profile">{"".join(controls)}{"".join(svg)}'
        f'<div class="tip" hidden></div></div><p class="sub">{escape(legend)}</p>'
        "</section>",
        css,
    )


# --------------------------------------------------------------- the page
_CSS = """
.skloes-report{all:initial;display:block;box-sizing:border-box;
--fg:#1d2127;--muted:#5b6470;--bg:#ffffff;--panel:#f5f7fa;--line:#d8dde4;
--accent:#1f6feb;--sel:#d1242f;--band:rgba(31,111,235,.16);--bar:rgba(130,80,223,.22);
--barline:#8250df;--metric:#0b7a5c;--hl:rgba(255,196,0,.28);
color:var(--fg);background:var(--bg);font:14px/1.45 system-ui,-apple-system,
"Segoe UI",Roboto,Helvetica,Arial,sans-serif;padding:16px 20px;max-width:1100px}
@media (prefers-color-scheme: dark){.skloes-report{--fg:#e6e9ee;--muted:#9aa4b1;
--bg:#15181d;--panel:#1f242b;--line:#343b45;--accent:#58a6ff;--sel:#ff7b72;
--band:rgba(88,166,255,.2);--bar:rgba(188,140,255,.25);--barline:#bc8cff;
--metric:#3fb950;--hl:rgba(255,196,0,.18)}}
.skloes-report *{box-sizing:border-box}
.skloes-report h1{font-size:22px;margin:0 0 2px}
.skloes-report h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid var(--line);
padding-bottom:3px}
.skloes-report h1,.skloes-report h2,.skloes-report p,.skloes-report dl{display:block}
.skloes-report p{margin:4px 0}
.skloes-report .sub{color:var(--muted);font-size:13px}
.skloes-report .facts{display:flex;flex-wrap:wrap;gap:4px 18px;margin:8px 0}
.skloes-report .facts div{display:flex;gap:6px}
.skloes-report dt{color:var(--muted)}
.skloes-report dd{margin:0;font-weight:600}
.skloes-report .about dd{font-weight:400}
.skloes-report code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.skloes-report .rec{background:var(--panel);border-left:4px solid var(--accent);
padding:4px 14px 8px;margin-top:14px}
.skloes-report .rec h2{border:0;margin-top:8px}
.skloes-report .rec-head{font-size:16px}
.skloes-report .scroll{overflow-x:auto;display:block}
.skloes-report table{border-collapse:collapse;font-variant-numeric:tabular-nums;
font-size:13px;margin:6px 0;display:table}
.skloes-report th,.skloes-report td{border-bottom:1px solid var(--line);
padding:3px 9px;text-align:left;vertical-align:top}
.skloes-report .n{text-align:right}
.skloes-report thead th{background:var(--panel);position:sticky;top:0}
.skloes-report th button{all:unset;cursor:pointer;font-weight:600}
.skloes-report th button:focus-visible{outline:2px solid var(--accent)}
.skloes-report th[aria-sort=ascending] button::after{content:" \\25B2"}
.skloes-report th[aria-sort=descending] button::after{content:" \\25BC"}
.skloes-report tr.sel td[data-col=selected]{color:var(--sel);font-weight:700}
.skloes-report tr.hl td,.skloes-report tr.hl th{background:var(--hl)}
.skloes-report .profile{position:relative;display:flex;flex-wrap:wrap;gap:4px 6px;
align-items:center}
.skloes-report .profile label{margin-right:10px;cursor:pointer}
.skloes-report .profile input{margin:0;accent-color:var(--accent)}
.skloes-report .profile-svg{flex-basis:100%;max-width:860px;height:auto;display:block}
.skloes-report svg text{fill:var(--fg);font-size:11px;font-family:inherit}
.skloes-report svg .tick{fill:var(--muted);font-size:10px}
.skloes-report svg .grid{stroke:var(--line);stroke-width:1}
.skloes-report svg .band{fill:var(--band)}
.skloes-report svg .line{fill:none;stroke:var(--accent);stroke-width:2}
.skloes-report svg .mark{fill:var(--accent)}
.skloes-report svg .mark.sel{fill:var(--sel);stroke:var(--bg);stroke-width:1.5}
.skloes-report svg .mark.on{stroke:var(--fg);stroke-width:2}
.skloes-report svg .bar{fill:var(--bar);stroke:var(--barline);stroke-width:.6}
.skloes-report svg text.freq{fill:var(--barline)}
.skloes-report svg .metric{display:none}
.skloes-report svg .mline{fill:none;stroke:var(--metric);stroke-width:1.8}
.skloes-report svg .mdot{fill:var(--metric)}
.skloes-report svg .rec{fill:var(--sel);opacity:.85}
.skloes-report svg .hit{fill:transparent;cursor:crosshair}
.skloes-report svg .hl-col{fill:var(--hl)}
.skloes-report .sw-score:not(:checked) ~ svg .score{display:none}
.skloes-report .sw-band:not(:checked) ~ svg .band{display:none}
.skloes-report .sw-freq:not(:checked) ~ svg .freq{display:none}
.skloes-report .tip{position:absolute;z-index:2;pointer-events:none;
background:var(--panel);border:1px solid var(--line);padding:6px 9px;font-size:12px;
box-shadow:0 2px 8px rgba(0,0,0,.18);white-space:nowrap}
.skloes-report .tip[hidden]{display:none}
.skloes-report .tip b{display:block;margin-bottom:2px}
.skloes-report footer{color:var(--muted);font-size:12px;margin-top:20px;display:block}
"""

# Sorting and hovering; the page works without it (tables, native tooltips).
_JS = r"""
function skloesReport(root){
  if(!root||root.dataset.ready)return;root.dataset.ready="1";
  var num=function(td){var v=parseFloat(td.getAttribute("data-value"));
    return isNaN(v)?null:v;};
  root.querySelectorAll("table.sortable").forEach(function(table){
    var ths=table.querySelectorAll("thead th");
    ths.forEach(function(th,k){
      var b=document.createElement("button");b.type="button";
      b.textContent=th.textContent;th.textContent="";th.appendChild(b);
      b.addEventListener("click",function(){
        var asc=th.getAttribute("aria-sort")!=="ascending";
        ths.forEach(function(o){o.removeAttribute("aria-sort");});
        th.setAttribute("aria-sort",asc?"ascending":"descending");
        var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(r,s){var a=num(r.cells[k]),c=num(s.cells[k]);
          if(a===null&&c===null)return 0;if(a===null)return 1;if(c===null)return -1;
          return asc?a-c:c-a;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  var table=root.querySelector("table.layers"),tip=root.querySelector(".tip"),
      box=root.querySelector(".profile"),col=root.querySelector(".hl-col");
  if(!table||!tip||!box)return;
  var names=Array.prototype.map.call(table.querySelectorAll("thead th"),
    function(th){return th.getAttribute("data-col");});
  var rowOf=function(i){return table.querySelector('tr[data-layer="'+i+'"]');};
  var mark=function(i){return root.querySelector('circle.mark[data-layer="'+i+'"]');};
  var off=function(){tip.hidden=true;if(col)col.setAttribute("visibility","hidden");
    root.querySelectorAll("tr.hl").forEach(function(r){r.classList.remove("hl");});
    root.querySelectorAll("circle.mark.on").forEach(function(c){c.classList.remove("on");});};
  var on=function(i,hit){off();var row=rowOf(i);if(!row)return;row.classList.add("hl");
    var m=mark(i);if(m)m.classList.add("on");
    if(hit&&col){col.setAttribute("x",hit.getAttribute("x"));
      col.setAttribute("visibility","visible");}
    tip.textContent="";var h=document.createElement("b");h.textContent="layer "+i;
    tip.appendChild(h);
    Array.prototype.forEach.call(row.cells,function(td,k){
      if(names[k]==="layer")return;var d=document.createElement("div");
      d.setAttribute("data-col",names[k]);
      d.textContent=names[k]+": "+(td.textContent||(names[k]==="selected"?"no":"-"));
      tip.appendChild(d);});
    tip.hidden=false;
    if(hit){var r=hit.getBoundingClientRect(),b=box.getBoundingClientRect();
      var x=r.left-b.left+r.width+8;
      if(x+tip.offsetWidth>b.width)x=r.left-b.left-tip.offsetWidth-8;
      tip.style.left=Math.max(0,x)+"px";tip.style.top=(r.top-b.top+20)+"px";}};
  root.querySelectorAll("rect.hit").forEach(function(hit){
    var i=hit.getAttribute("data-layer");
    hit.addEventListener("mouseenter",function(){on(i,hit);});
    hit.addEventListener("mouseleave",off);});
  Array.prototype.forEach.call(table.tBodies[0].rows,function(row){
    row.addEventListener("mouseenter",function(){var i=row.getAttribute("data-layer");
      off();row.classList.add("hl");var m=mark(i);if(m)m.classList.add("on");});
    row.addEventListener("mouseleave",off);});
}
"""


def _fragment(report, about, uid):
    """The report's markup and scoped styles, one ``div.skloes-report``."""
    summary = json.loads(json.dumps(report.summary()))  # as selection.json holds it
    about = check_about(about)
    profile, css = _profile(report, uid)
    body = "".join(
        [
            _header(report, summary, about),
            _recommendation(report, summary),
            profile,
            _methods_table(summary),
            _folds_table(summary),
            _layer_table(report, summary),
            _settings(report),
            "<footer>Written by skloes; one file, nothing fetched. The numbers "
            "are those of layers.csv and selection.json, rounded as the text "
            "report rounds them.</footer>",
        ]
    )
    return (
        f'<div class="skloes-report" id="{uid}"><style>{_CSS}{css}</style>{body}</div>'
    )


def report_page(report, about=None):
    """The standalone page of a fitted report (``report.html``).

    Parameters
    ----------
    report : LayerReport
        Fitted.
    about : mapping of str to object or None, default=None
        What the report was made from (data, model, ...), shown as text.

    Returns
    -------
    html : str
        A complete HTML document: no external resource, scripts optional.
    """
    uid = "skloes-report"
    title = "skloes layer report"
    about = check_about(about)
    if "data" in about:
        title += f": {about['data']}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{escape(title)}</title>"
        "<style>html,body{margin:0;background:#fff}@media (prefers-color-scheme:"
        " dark){html,body{background:#15181d}}</style></head><body>"
        f"{_fragment(report, about, uid)}"
        f'<script>{_JS}skloesReport(document.getElementById("{uid}"));</script>'
        "</body></html>\n"
    )


def notebook_html(report, about=None):
    """The report for a notebook cell, isolated in a shadow DOM.

    The markup sits in a host element; its script moves it into the host's
    shadow root (so the notebook's styles cannot reach it and its own stay
    inside) and wires the sorting and hovering there. Where scripts do not
    run (an untrusted notebook, a static render), the same markup shows in
    place, its styles scoped to its own ``skloes-report`` class.

    Parameters
    ----------
    report : LayerReport
        Fitted.
    about : mapping of str to object or None, default=None
        What the report was made from, shown as text.

    Returns
    -------
    html : str
    """
    uid = f"skloes-report-{uuid.uuid4().hex[:12]}"
    return (
        f'<div class="skloes-report-host" id="{uid}-host">'
        f"{_fragment(report, about, uid)}</div>"
        f"<script>(function(){{{_JS}"
        f'var host=document.getElementById("{uid}-host");'
        "if(!host||host.shadowRoot||!host.attachShadow)return;"
        "var nodes=Array.prototype.slice.call(host.childNodes);"
        'var shadow=host.attachShadow({mode:"open"});'
        "nodes.forEach(function(n){shadow.appendChild(n);});"
        'skloesReport(shadow.querySelector(".skloes-report"));})();</script>'
    )
