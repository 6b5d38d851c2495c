"""Benchmark: the README's headline, LOES against its baselines from raw texts.

For each model (SmolLM2-135M-Instruct, 31 hidden states, ``max_length=64``;
Gemma 3 270M, 19 hidden states, and Qwen2.5-Coder-0.5B-Instruct, 25 hidden
states, both ``max_length=64`` and run with ``--n-texts 1000``; MiniLM, 7
hidden states, ``max_length=128``) and each data set (Rotten Tomatoes, BBC
News, chatterbot language ID; 2,000 texts each, a stratified subsample with
seed 0), every arm is a :class:`skloes.probe.LayerProbeClassifier`
with the library's defaults except its ``selector``, scored by scikit-learn's
``cross_validate`` over ``StratifiedKFold(5, shuffle=True, random_state=0)``:
the selector and the head are fitted inside each training fold. Arms:

- LOES: the probe's default selector (``selector=None``);
- the last layer; all layers (under the default fusion) and all layers
  concatenated (``fusion="concatenate"``, the 0.2 head);
- the best single layer chosen by its own inner CV and greedy forward
  selection, with their defaults (greedy keeps as many layers as LOES).

The head is the probe's default (standardised selected layers, combined by
the default ``fusion``: ``"auto"`` since issue 36, which chooses among
concatenation, the average and the stack of per-layer probes by inner CV in
each training fold; each fold's choice is recorded), so the table follows
the library's defaults. A store written under another default fusion keeps
the arms it does not change (one layer is its own head under every fusion;
its concatenated all-layers arm becomes ``all_concat``) and refits the
others. Every probe
shares one content-addressed hidden-states cache (``benchmarks/_features.py``):
each text runs through each model once, and reruns read the cache.

Run ``python benchmarks/bench_headline.py [--models smollm2 minilm]
[--n-texts 2000] [--arms loes last best_single all]`` (``--arms``: only those
arms, the others kept or left for a later run); it writes
``benchmarks/results/headline.md`` (and the per-fold rows to
``headline.json``, which a rerun reuses unless ``--force``).
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from _features import (
    HEADLINE_SETS,
    MODELS,
    cross_validate_probe,
    layer_stack,
    load_texts,
    probe,
)
from _machine import machine, machine_lines

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("loes", "last", "best_single", "greedy", "all", "all_concat")
LABELS = {
    "loes": "LOES (probe default)",
    "last": "last layer",
    "best_single": "best single layer (inner CV)",
    "greedy": "greedy forward",
    "all": "all layers (default fusion)",
    "all_concat": "all layers (concatenated)",
}
# Arms a change of the default fusion leaves alone: one layer is its head.
SINGLE = ("last", "best_single")


def _selector(arm):
    """The selector of an arm; None is the probe's default (LOES)."""
    from skloes import selection

    return {
        "loes": lambda: None,
        "last": selection.LastLayerSelector,
        "best_single": lambda: selection.BestSingleLayerSelector(random_state=0),
        "greedy": lambda: selection.GreedyForwardSelector(random_state=0),
        "all": selection.AllLayersSelector,
        "all_concat": selection.AllLayersSelector,
    }[arm]()


def _params(arm):
    return {"fusion": "concatenate"} if arm == "all_concat" else {}


def _under_fusion(entry, fusion):
    """The entry's arms valid under the default ``fusion``: a store written
    under another keeps the single-layer arms, and its concatenated
    all-layers arm as ``all_concat``."""
    old = entry.get("fusion", "concatenate")
    if old == fusion:
        return entry
    arms = entry.get("arms", {})
    kept = {arm: arms[arm] for arm in SINGLE if arm in arms}
    if old == "concatenate" and "all" in arms:
        kept["all_concat"] = arms["all"]
    if "all_concat" in arms:
        kept["all_concat"] = arms["all_concat"]
    return {**entry, "fusion": fusion, "arms": kept}


def run(models, datasets, n_texts, force=False, store_path=None, arms=ARMS):
    """Fill the store ``{model/dataset: {meta, arms}}`` with what is missing
    (of ``arms``)."""
    from skloes.core._fusion import DEFAULT_FUSION

    store_path = store_path or RESULTS / "headline.json"
    store = json.loads(store_path.read_text()) if store_path.exists() else {}
    for model in models:
        for dataset in datasets:
            key = f"{model}/{dataset}"
            entry = store.get(key, {})
            if entry.get("meta", {}).get("n") not in (None, n_texts) or force:
                entry = {}
            entry = _under_fusion(entry, DEFAULT_FUSION) if entry else entry
            entry.setdefault("fusion", DEFAULT_FUSION)
            _, _, meta = layer_stack(model, dataset, n_texts)  # warm the cache
            print(f"{key}: {meta}", flush=True)
            entry.setdefault("meta", meta)
            done = entry.setdefault("arms", {})
            texts, y = load_texts(dataset, n_texts)
            for arm in arms:
                if arm in done:
                    continue
                start = time.perf_counter()
                estimator = probe(model, selector=_selector(arm), **_params(arm))
                done[arm] = cross_validate_probe(estimator, texts, y)
                done[arm]["machine"] = machine()
                print(
                    f"  {arm:12s} {100 * np.mean(done[arm]['accuracy']):.2f}  "
                    f"picks {done[arm]['picks'][0]}  "
                    f"{time.perf_counter() - start:.0f} s",
                    flush=True,
                )
                store[key] = entry
                store_path.write_text(json.dumps(store, indent=1))
    return store


def _mean(store, model, arm, datasets):
    return float(
        np.mean(
            [
                100 * np.mean(store[f"{model}/{d}"]["arms"][arm]["accuracy"])
                for d in datasets
            ]
        )
    )


def _arms(entries):
    """The arms every entry holds, in the table's order."""
    return [arm for arm in ARMS if all(arm in e["arms"] for e in entries)]


def _fusion(entries):
    """The default fusion the entries were measured under (``concatenate``
    before it was a parameter)."""
    return entries[0].get("fusion", "concatenate")


def model_table(store, model, datasets):
    """The markdown accuracy table of one model."""
    entries = [store[f"{model}/{d}"] for d in datasets]
    meta = entries[0]["meta"]
    lines = [
        f"## {model} ({meta['shape'][0]} hidden states, max_length "
        f"{meta['max_length']}, {meta['n']} texts per set, default fusion "
        f"{_fusion(entries)!r})",
        "",
        "Accuracy %, mean (sd) over the 5 outer folds; fit s: median seconds "
        "of one fold's `fit` (hidden states read from the cache, selection, "
        "head).",
        "",
        "| method | "
        + " | ".join(datasets)
        + " | mean | fit s ("
        + " / ".join(datasets)
        + ") |",
        "|---|" + "---|" * (len(datasets) + 2),
    ]
    for arm in _arms(entries):
        cells, fits = [], []
        for entry in entries:
            acc = 100 * np.asarray(entry["arms"][arm]["accuracy"])
            cells.append(f"{acc.mean():.2f} ({acc.std():.1f})")
            fits.append(f"{np.median(entry['arms'][arm]['fit_s']):.1f}")
        lines.append(
            f"| {LABELS[arm]} | "
            + " | ".join(cells)
            + f" | {_mean(store, model, arm, datasets):.2f} | {' / '.join(fits)} |"
        )
    lines += ["", "Layers used per fold (pick order; 0 = embedding output):", ""]
    for d, entry in zip(datasets, entries, strict=True):
        for arm in ("loes", "best_single", "greedy"):
            if arm not in entry["arms"]:
                continue
            picks = "; ".join(
                ",".join(map(str, p)) for p in entry["arms"][arm]["picks"]
            )
            lines.append(f"- {d}, {LABELS[arm]}: {picks}")
    lines += ["", "Fusion each fold's probe fitted (``fusion_``):", ""]
    for d, entry in zip(datasets, entries, strict=True):
        for arm in ("loes", "greedy", "all"):
            fusions = entry["arms"].get(arm, {}).get("fusions")
            if fusions and any(fusions):
                shown = ", ".join(
                    f"{f} {fusions.count(f)}" for f in dict.fromkeys(fusions)
                )
                lines.append(f"- {d}, {LABELS[arm]}: {shown}")
    extract = ", ".join(
        f"{d} {e['meta']['extract_seconds']:.0f} s"
        for d, e in zip(datasets, entries, strict=True)
    )
    lines += ["", f"First extraction of the hidden states (all layers): {extract}.", ""]
    return lines


def _complete(store, model, datasets):
    """Whether every arm of ``model`` ran on every set (under the default)."""
    return all(
        f"{model}/{d}" in store and set(ARMS) <= set(store[f"{model}/{d}"]["arms"])
        for d in datasets
    )


def _earlier(store, model, datasets):
    """Whether ``model`` holds a whole run under an earlier default fusion
    (its table is kept, marked with that fusion, until a rerun replaces it)."""
    from skloes.core._fusion import DEFAULT_FUSION

    keys = [f"{model}/{d}" for d in datasets]
    if not all(k in store for k in keys):
        return False
    entries = [store[k] for k in keys]
    kept = {"loes", "last", "best_single", "greedy", "all"}
    return _fusion(entries) != DEFAULT_FUSION and kept <= set(_arms(entries))


# The README's table: one row per model family, in this order.
README_ROWS = (
    ("minilm", "all-MiniLM-L6-v2 (encoder)"),
    ("smollm2", "SmolLM2-135M-Instruct"),
    ("gemma3", "Gemma 3 270M"),
    ("qwen2", "Qwen2.5-Coder-0.5B-Instruct"),
)
README_ARMS = ("loes", "last", "best_single", "all")


def _cell(store, model, arm, datasets):
    """Mean accuracy % over ``datasets`` and its fold spread: the standard
    deviation over the 5 outer folds of the fold's mean over the sets."""
    per_fold = np.mean(
        [store[f"{model}/{d}"]["arms"][arm]["accuracy"] for d in datasets], axis=0
    )
    return f"{100 * per_fold.mean():.1f} ± {100 * per_fold.std():.1f}"


def headline_lines(store, datasets):
    """The README's table: per model, each arm's mean accuracy over the
    sets with its fold spread (only models with every arm on every set)."""
    out = [
        "## The README's table",
        "",
        "Accuracy %, mean over " + ", ".join(datasets) + " ± the standard "
        "deviation over the 5 outer folds of each fold's mean over the sets; "
        "every arm a `LayerProbeClassifier` with the library's defaults but "
        "its selector, selection inside each fold.",
        "",
        "| model | hidden states | texts per set | "
        + " | ".join(LABELS[a] for a in README_ARMS)
        + " |",
        "|---|---|---|" + "---|" * len(README_ARMS),
    ]
    for model, name in README_ROWS:
        keys = [f"{model}/{d}" for d in datasets]
        if not all(
            k in store and set(README_ARMS) <= set(store[k]["arms"]) for k in keys
        ):
            continue
        meta = store[keys[0]]["meta"]
        cells = [_cell(store, model, arm, datasets) for arm in README_ARMS]
        out.append(
            f"| {name} | {meta['shape'][0]} | {meta['n']:,} | "
            + " | ".join(cells)
            + " |"
        )
    return out + [""]


def _measured(store, model, datasets):
    """The sets on which ``model`` has at least LOES and the last layer."""
    return [
        d
        for d in datasets
        if {"loes", "last"} <= set(store.get(f"{model}/{d}", {}).get("arms", {}))
    ]


def write_markdown(store, datasets, path=None):
    import sklearn
    import torch

    lines = [
        "# The README's headline: LOES against its baselines, from raw texts",
        "",
        f"Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by "
        "`benchmarks/bench_headline.py` (part `headline` of "
        "`benchmarks/reproduce.py`) on a machine shared with other jobs, "
        f"Python {platform.python_version()}, scikit-learn {sklearn.__version__}, "
        f"torch {torch.__version__}. Protocol: the script's docstring; every "
        "arm is a `LayerProbeClassifier` with the library's defaults but its "
        "selector, cross-validated with `cross_validate` (selection inside "
        "each fold).",
        "",
        machine_lines(
            arm.get("machine")
            for entry in store.values()
            for arm in entry.get("arms", {}).values()
        ),
        "",
        *headline_lines(store, datasets),
    ]
    for model in MODELS:
        if _complete(store, model, datasets) or _earlier(store, model, datasets):
            lines += model_table(store, model, datasets)
        elif _measured(store, model, datasets):  # a partial run: what it has
            lines += model_table(store, model, _measured(store, model, datasets))
    path = path or RESULTS / "headline.md"
    path.write_text("\n".join(lines))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=list(MODELS)
    )
    parser.add_argument("--datasets", nargs="+", default=list(HEADLINE_SETS))
    parser.add_argument("--n-texts", type=int, default=2000)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS / "headline.md")
    args = parser.parse_args(argv)
    store_path = args.output.with_suffix(".json")
    store = run(
        args.models, args.datasets, args.n_texts, args.force, store_path, args.arms
    )
    # A run on some of the headline sets rewrites the whole table (its other
    # models' figures are means over the three sets, not over this run's).
    headline = set(args.datasets) <= set(HEADLINE_SETS)
    shown = list(HEADLINE_SETS) if headline else args.datasets
    path = write_markdown(store, shown, args.output)
    print(path.read_text())


if __name__ == "__main__":
    main()
