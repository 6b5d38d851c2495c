"""The report as one self-contained HTML page, and its notebook display.

:func:`report_page` renders a fitted :class:`~skloes.report.LayerReport` as a
standalone page (``report.html`` of a report folder): inline CSS, inline SVG
written here (no plotting library), a small hand-written script, nothing
fetched. The styles and the script are package data files
(``skloes/report/_static/report.css`` and ``report.js``), inlined as read.
:func:`notebook_html` renders the same content for a notebook cell,
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

import functools
import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from importlib.resources import files

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


@dataclass(frozen=True)
class _Frame:
    """Where the profile draws: one band per layer (centres ``xs``), the
    score panel from ``top`` (scores ``lo`` to ``hi``), the metric panel
    from ``bottom_top``, the layer axis at the foot of ``height``."""

    xs: list
    band: float
    lo: float
    hi: float
    top: int
    bottom_top: int
    height: int

    @classmethod
    def of(cls, cols, has_metrics):
        n_layers = len(cols["layer"])
        band = (_W - _LEFT - _RIGHT) / n_layers
        score = np.asarray(cols["probe_score"])
        std = np.asarray(cols["probe_score_std"])
        lo, hi = _range(np.concatenate([score - std, score + std]))
        top = 12
        bottom_top = top + _TOP_H + _GAP
        height = bottom_top + (_BOTTOM_H + _GAP if has_metrics else 0) + _AXIS
        xs = [_LEFT + (i + 0.5) * band for i in range(n_layers)]
        return cls(xs, band, lo, hi, top, bottom_top, height)

    def score_y(self, v):
        """The height of score ``v`` in the top panel."""
        return self.top + _TOP_H - (v - self.lo) / (self.hi - self.lo) * _TOP_H


def _score_panel(frame, cols, rec, scoring):
    """The top panel: the score axis, the folds' picks (bars), the score's
    fold spread (band), its line and marks (large: LOES's layers), and the
    recommended method's layers (triangles under the panel)."""
    top, xs, sy = frame.top, frame.xs, frame.score_y
    score, std = np.asarray(cols["probe_score"]), np.asarray(cols["probe_score_std"])
    parts = [
        _axis_y(_LEFT, top, _TOP_H, frame.lo, frame.hi),
        f'<text class="label" x="14" y="{top + _TOP_H / 2:.0f}" '
        f'transform="rotate(-90 14 {top + _TOP_H / 2:.0f})" text-anchor="middle">'
        f"{escape(scoring)} (CV)</text>",
    ]
    freq = cols.get("selection_frequency")
    if freq is not None:
        parts.append(_frequency_bars(freq, xs, frame.band, top))
    upper = [f"{x:.1f},{sy(v):.1f}" for x, v in zip(xs, score + std, strict=True)]
    lower = [f"{x:.1f},{sy(v):.1f}" for x, v in zip(xs, score - std, strict=True)]
    parts.append(
        f'<polygon class="band" points="{" ".join(upper + lower[::-1])}"/>'
        f'<path class="score line" d="{_path(xs, [sy(v) for v in score])}"/>'
    )
    marks = [
        f'<circle class="{"mark sel" if picked else "mark"}" data-layer="{i}" '
        f'cx="{xs[i]:.1f}" cy="{sy(score[i]):.1f}" r="{5 if picked else 3.2}"/>'
        for i, picked in enumerate(cols["selected"])
    ]
    parts.append(f'<g class="score">{"".join(marks)}</g>')
    parts.append(
        "".join(
            f'<path class="rec" data-layer="{i}" d="M{xs[i]:.1f},'
            f'{top + _TOP_H + 3:.1f} l-5,9 h10 z"><title>recommended: '
            f"{escape(rec.method)}</title></path>"
            for i in rec.layers
        )
    )
    return parts


def _metric_panel(frame, j, name, values):
    """The bottom panel's drawing of metric ``j`` (shown when chosen)."""
    top, xs = frame.bottom_top, frame.xs
    values = np.asarray(values, dtype=float)
    mlo, mhi = _range(values)
    my = [
        top + _BOTTOM_H - (v - mlo) / (mhi - mlo) * _BOTTOM_H
        if np.isfinite(v)
        else np.nan
        for v in values
    ]
    dots = "".join(
        f'<circle class="mdot" data-layer="{i}" cx="{xs[i]:.1f}" cy="{y:.1f}" r="2.8"/>'
        for i, y in enumerate(my)
        if np.isfinite(y)
    )
    return (
        f'<g class="metric mk{j}" data-metric="{escape(name)}">'
        f"{_axis_y(_LEFT, top, _BOTTOM_H, mlo, mhi)}"
        f'<path class="mline" d="{_path(xs, my)}"/>{dots}'
        f'<text class="label" x="14" y="{top + _BOTTOM_H / 2:.0f}" '
        f'transform="rotate(-90 14 {top + _BOTTOM_H / 2:.0f})" '
        f'text-anchor="middle">{escape(name)}</text></g>'
    )


def _layer_axis(frame):
    """The layer axis (every layer's index, or every few past 32 layers),
    and the hidden highlight of the hovered layer's column."""
    xs, height, top = frame.xs, frame.height, frame.top
    axis_y = height - _AXIS + 14
    step = max(1, math.ceil(len(xs) / 32))
    ticks = "".join(
        f'<text class="tick" x="{xs[i]:.1f}" y="{axis_y}" text-anchor="middle">{i}'
        "</text>"
        for i in range(0, len(xs), step)
    )
    return [
        f'{ticks}<text class="label" x="{(_LEFT + _W - _RIGHT) / 2:.0f}" '
        f'y="{height - 4}" text-anchor="middle">layer</text>',
        f'<rect class="hl-col" x="0" y="{top}" width="{frame.band:.1f}" '
        f'height="{height - _AXIS - top}" visibility="hidden"/>',
    ]


def _hover_targets(frame, cols):
    """One transparent column per layer, its numbers as a native tooltip."""
    out = []
    for i, x in enumerate(frame.xs):
        tip = "; ".join(
            f"{c} "
            + (
                _cell_value(cols[c][i])
                if c in ("layer", "selected")
                else _text(float(cols[c][i]))
            )
            for c in cols
        )
        out.append(
            f'<rect class="hit" data-layer="{i}" x="{x - frame.band / 2:.1f}" '
            f'y="{frame.top}" width="{frame.band:.1f}" '
            f'height="{frame.height - _AXIS - frame.top}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    return out


def _profile_controls(uid, has_freq, metrics):
    """The switches above the profile (score, spread, picks; one metric at
    a time) and the styles that show the chosen metric."""
    controls = [
        f'<input type="checkbox" id="{uid}-sw-score" class="sw sw-score" checked>'
        f'<label for="{uid}-sw-score">probe score</label>',
        f'<input type="checkbox" id="{uid}-sw-band" class="sw sw-band" checked>'
        f'<label for="{uid}-sw-band">fold spread (± std)</label>',
    ]
    if has_freq:
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
    return "".join(controls), css


def _profile_legend(has_freq, has_metrics):
    return (
        "Probe score per layer with its spread over the folds (band); large "
        "marks: the LOES layers; triangles: the recommended method's layers"
        + ("; bars: how often the folds picked the layer" if has_freq else "")
        + ("; below, the metric chosen above" if has_metrics else "")
        + ". Hover a layer for its numbers."
    )


def _profile(report, uid):
    """The profile section (switches, the SVG, its legend) and the styles
    of its metric switches: probe score and metrics against the layer."""
    cols = _presenting.layer_columns(report)
    metrics = list(report.metrics_)
    frame = _Frame.of(cols, bool(metrics))
    svg = [
        f'<svg class="profile-svg" viewBox="0 0 {_W} {frame.height}" role="img" '
        f'aria-label="probe score and metrics against the layer" '
        f'xmlns="http://www.w3.org/2000/svg">',
        *_score_panel(frame, cols, report.recommendation_, report.scoring_),
        *(_metric_panel(frame, j, name, cols[name]) for j, name in enumerate(metrics)),
        *_layer_axis(frame),
        *_hover_targets(frame, cols),
        "</svg>",
    ]
    has_freq = cols.get("selection_frequency") is not None
    controls, css = _profile_controls(uid, has_freq, metrics)
    legend = _profile_legend(has_freq, bool(metrics))
    return (
        "<section><h2>Profile</h2>"
        f'<div class="profile">{controls}{"".join(svg)}'
        f'<div class="tip" hidden></div></div><p class="sub">{escape(legend)}</p>'
        "</section>",
        css,
    )


# --------------------------------------------------------------- the page
@functools.cache
def _static(name):
    """A file of the page kept as package data: ``_static/report.css``, its
    styles, and ``_static/report.js``, its sorting and hovering (the page
    works without the script: tables, native tooltips)."""
    return (files("skloes.report") / "_static" / name).read_text(encoding="utf-8")


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
    style = _static("report.css") + css
    return f'<div class="skloes-report" id="{uid}"><style>{style}</style>{body}</div>'


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
    start = f'skloesReport(document.getElementById("{uid}"));'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{escape(title)}</title>"
        "<style>html,body{margin:0;background:#fff}@media (prefers-color-scheme:"
        " dark){html,body{background:#15181d}}</style></head><body>"
        f"{_fragment(report, about, uid)}"
        f"<script>{_static('report.js')}{start}</script>"
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
        f"<script>(function(){{{_static('report.js')}"
        f'var host=document.getElementById("{uid}-host");'
        "if(!host||host.shadowRoot||!host.attachShadow)return;"
        "var nodes=Array.prototype.slice.call(host.childNodes);"
        'var shadow=host.attachShadow({mode:"open"});'
        "nodes.forEach(function(n){shadow.appendChild(n);});"
        'skloesReport(shadow.querySelector(".skloes-report"));})();</script>'
    )
