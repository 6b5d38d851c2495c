"""Layer-profile and budget plots (matplotlib, imported only when drawn)."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from skloes.utils._optional import import_optional

__all__ = ["plot_budget_curve", "plot_layer_profile"]


def _scaled(values):
    values = np.asarray(values, dtype=np.float64)
    lo, hi = np.nanmin(values), np.nanmax(values)
    if not np.isfinite(hi - lo) or hi - lo <= 0:
        return np.full_like(values, 0.5), (lo, hi)
    return (values - lo) / (hi - lo), (lo, hi)


def plot_layer_profile(report, metrics=None, *, ax=None, figsize=(10.0, 6.0)):
    """Draw a fitted report's layer profile.

    The top panel shows the probe's CV score per layer (± one standard
    deviation over folds), the last layer's score as a dashed reference line
    and the LOES layers as shaded columns with star markers. The bottom panel
    shows each metric min-max scaled to [0, 1] over layers (the legend gives
    each metric's raw range), so that metrics with different units share one
    axis. Layers are on integer ticks, 0 being the embedding output.

    Parameters
    ----------
    report : LayerReport
        A fitted report.
    metrics : list of str or None, default=None
        Metrics to draw; None draws every metric of the report.
    ax : pair of matplotlib Axes or None, default=None
        Axes for the score and metric panels; None creates a new figure.
    figsize : tuple of float, default=(10.0, 6.0)
        Size of a new figure in inches.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure holding both panels.

    Examples
    --------
    >>> from skloes.plotting import plot_layer_profile
    >>> fig = plot_layer_profile(report)  # doctest: +SKIP
    >>> fig.savefig("profile.png")  # doctest: +SKIP
    """
    import_optional("matplotlib", extra="plot")
    from matplotlib.figure import Figure

    if ax is None:
        # A bare Figure: no pyplot state, no GUI backend, safe in scripts.
        fig = Figure(figsize=figsize)
        ax_score, ax_metric = fig.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2], "hspace": 0.08}
        )
        fig.subplots_adjust(left=0.08, right=0.72, top=0.93, bottom=0.09)
    else:
        ax_score, ax_metric = ax
        fig = ax_score.figure
    layers = np.asarray(report.layers_)
    selected = np.asarray(report.selected_layers_)
    _score_panel(ax_score, report, layers, selected)
    names = list(report.metrics_) if metrics is None else list(metrics)
    _metric_panel(ax_metric, report, layers, selected, names)
    ax_metric.set_xticks(layers)
    ax_metric.set_xlim(layers[0] - 0.5, layers[-1] + 0.5)
    ax_metric.set_xlabel("layer (0 = embedding output)")
    fig.align_ylabels([ax_score, ax_metric])
    return fig


def _mark_selected(ax, selected, label=None):
    for i, layer in enumerate(selected):
        ax.axvspan(
            layer - 0.4,
            layer + 0.4,
            color="tab:orange",
            alpha=0.15,
            lw=0,
            label=label if i == 0 else None,
        )


def _sd_band(ax, x, mean, std, *, alpha):
    """The blue ``mean ± std`` band over the folds."""
    ax.fill_between(
        x,
        mean - std,
        mean + std,
        color="tab:blue",
        alpha=alpha,
        lw=0,
        label="± 1 sd over folds",
    )


def _score_panel(ax, report, layers, selected):
    mean, std = report.probe_scores_, report.probe_scores_std_
    _mark_selected(ax, selected, "LOES layers: " + ", ".join(map(str, selected)))
    _sd_band(ax, layers, mean, std, alpha=0.15)
    ax.plot(layers, mean, "o-", color="tab:blue", label=f"probe {report.scoring_} (CV)")
    ax.axhline(
        mean[-1], ls="--", color="0.4", lw=1, label=f"last layer ({mean[-1]:.3f})"
    )
    sel = np.isin(layers, selected)
    ax.plot(
        layers[sel],
        mean[sel],
        "*",
        ms=14,
        color="tab:orange",
        mec="k",
        mew=0.6,
        zorder=3,
    )
    fused = report.summary()["fused_score"]
    ax.axhline(
        fused, ls=":", color="tab:orange", lw=1.5, label=f"LOES fused ({fused:.3f})"
    )
    ax.set_ylabel(f"{report.scoring_} (CV)")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    freq = getattr(report, "selection_frequency_", None)
    if freq is not None:  # how often each layer was picked across the folds
        twin = ax.twinx()
        bars = twin.bar(layers, freq, width=0.5, color="0.5", alpha=0.3, zorder=0)
        twin.set_ylim(0, 4)  # bars fill the bottom quarter of the panel
        twin.set_yticks([])
        handles.append(bars)
        labels.append(f"picked in folds (stability {report.selection_stability_:.2f})")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title("Layer profile: probe score and layer metrics", fontsize=11)


def _metric_panel(ax, report, layers, selected, names):
    _mark_selected(ax, selected)
    markers = "sD^vP<>Xph"
    for i, name in enumerate(names):
        if name not in report.metrics_:
            raise ValueError(
                f"plot_layer_profile: unknown metric {name!r}; the report has "
                f"{list(report.metrics_)}."
            )
        scaled, (lo, hi) = _scaled(report.metrics_[name])
        ax.plot(
            layers,
            scaled,
            marker=markers[i % len(markers)],
            ms=5,
            label=f"{name} [{lo:.3g}, {hi:.3g}]",
        )
    ax.set_ylabel("metric (min-max scaled)")
    ax.set_ylim(-0.08, 1.08)
    ax.grid(alpha=0.3)
    if names:
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            title="metric [min, max]",
            title_fontsize=8,
        )


def plot_budget_curve(selector, *, ax=None, figsize=(5.5, 3.5)):
    """Draw the cross-validated score of a ``LOESSelectorCV`` against its budget.

    The mean held-out score over the folds for each number of layers, with
    one standard deviation over the folds as a band and every fold's scores
    as faint lines, and the budget the selector's rule chose marked (as
    scikit-learn's ``RFECV`` example draws its ``cv_results_``).

    .. versionadded:: 0.3

    Parameters
    ----------
    selector : LOESSelectorCV or LayerReport
        A fitted ``LOESSelectorCV``, or a fitted report whose selector is one
        (``n_layers_to_select="auto"``).
    ax : matplotlib Axes or None, default=None
        Where to draw; None makes a new figure.
    figsize : tuple of float, default=(5.5, 3.5)
        Size in inches of a new figure.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure drawn on.

    Examples
    --------
    >>> from skloes.plotting import plot_budget_curve
    >>> fig = plot_budget_curve(LOESSelectorCV().fit(H, y))  # doctest: +SKIP
    >>> fig.savefig("budget.png")  # doctest: +SKIP
    """
    selector = getattr(selector, "selector_", selector)
    results = getattr(selector, "cv_results_", None)
    if results is None or "n_layers" not in results:
        raise ValueError(
            "plot_budget_curve: `selector` must be a fitted LOESSelectorCV (or a "
            "report that used one); got "
            f"{type(selector).__name__}, which has no budget cv_results_."
        )
    import_optional("matplotlib", extra="plot")
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=figsize)
        ax = fig.subplots()
    fig = ax.figure
    _budget_panel(ax, selector, results)
    fig.tight_layout()
    return fig


def _budget_panel(ax, selector, results):
    budgets = np.asarray(results["n_layers"])
    mean = np.asarray(results["mean_test_score"], dtype=np.float64)
    std = np.asarray(results["std_test_score"], dtype=np.float64)
    splits = sorted(k for k in results if k.endswith("_test_score") and "split" in k)
    for i, key in enumerate(splits):
        ax.plot(
            budgets,
            results[key],
            color="0.6",
            lw=0.8,
            alpha=0.6,
            label="each fold" if i == 0 else None,
        )
    _sd_band(ax, budgets, mean, std, alpha=0.2)
    ax.plot(budgets, mean, "o-", color="tab:blue", label=f"mean of {len(splits)} folds")
    chosen = int(selector.n_layers_to_select_)
    rule = getattr(selector, "budget_rule", None)
    ax.axvline(
        chosen,
        color="tab:orange",
        ls="--",
        lw=1.5,
        label=f"chosen: {chosen}" + (f" ({rule})" if rule else ""),
    )
    ax.plot([chosen], [mean[chosen - 1]], "*", ms=14, color="tab:orange", mec="k")
    ax.set_xticks(budgets)
    ax.set_xlabel("layers selected (budget)")
    ax.set_ylabel("held-out score (CV)")
    ax.set_title("Cross-validated budget", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
