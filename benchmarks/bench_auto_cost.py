"""``fusion="auto"`` by closed-form leave-one-out scores: its cost against
``fusion="concatenate"`` and its accuracy against the inner-CV chooser it
replaced (issue 41).

Two parts, on the 14 stacks of ``benchmarks/bench_fusion.py``
(``benchmarks/_stacks.py``: mean-pooled, max_length 64):

- **accuracy** (``--part accuracy``): for every outer fold of the
  ``bench_fusion.py`` records (``results/fusion/*.json``), the fusion the
  library's ``fusion="auto"`` now chooses on the fold's training rows, from
  LOES's recorded layers (:func:`skloes.probe._auto_fusion.loo_fusion_scores`
  with the head's penalty, as ``LayerProbeClassifier`` calls it). Its held-out
  accuracy is the recorded accuracy of that fusion on that fold (the same
  probes: a chosen stack is scored with the record's inner folds, where the
  library now seeds them from the targets), beside the recorded accuracy of
  the inner-CV ``auto`` (5 inner folds x (K per-layer fits + 1 concatenated
  fit), the 0.3 development chooser). Accuracy does not depend on the load.
- **cost** (``--part cost``): ``LayerProbeClassifier``'s fit on a layer stack
  (selection, the choice of fusion, the head: ``_fit_stack``, the extractor
  fitted beforehand and outside the timing), the default against
  ``fusion="concatenate"``, on the training rows of the 5 folds of repeat 0,
  the two arms interleaved fold by fold (the order alternating), in one
  process pinned to one thread. The ratio of each fold's two times; per
  stack the median and the range over the folds, with ``/proc/loadavg``;
  also on the three MiniLM stacks of 2,000 texts the 0.3 changelog timed
  the inner-CV chooser on.

Writes ``results/auto_cost.json`` and ``results/auto_cost.md``.

    python benchmarks/bench_auto_cost.py --part accuracy cost
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _stacks  # noqa: E402
from _machine import machine, machine_line  # noqa: E402

RESULTS = Path(__file__).parent / "results"
RECORDS = RESULTS / "fusion"


def _records():
    for path in sorted(RECORDS.glob("*_*.json")):
        if path.stem.startswith("report_time"):
            continue
        yield json.loads(path.read_text())


def _outer_train(y, repeats):
    from sklearn.model_selection import StratifiedKFold

    out = {}
    for r in range(repeats):
        splitter = StratifiedKFold(5, shuffle=True, random_state=r)
        for i, (train, _) in enumerate(splitter.split(np.zeros((y.size, 1)), y)):
            out[(r, i)] = train
    return out


def accuracy():
    from skloes.core._fusion import choose_fusion
    from skloes.probe._auto_fusion import loo_fusion_scores, ridge_penalty
    from skloes.probe._house import default_head

    alpha = ridge_penalty(default_head("classification"))
    rows = []
    for rec in _records():
        stack, y, _ = _stacks.stack(rec["model"], rec["set"], rec["n"], 64)
        stack = np.asarray(stack, dtype=np.float64)
        classes = np.unique(y)
        trains = _outer_train(y, rec["repeats"])
        new, old, same, picks = [], [], 0, {}
        for fold in rec["folds"]:
            train = trains[(fold["repeat"], fold["fold"])]
            layers = sorted(fold["picks"]["loes"])
            fused = np.concatenate([stack[layer][train] for layer in layers], axis=1)
            scores = loo_fusion_scores(
                fused, y[train], layer_dim=stack.shape[2], classes=classes, alpha=alpha
            )
            pick = choose_fusion(scores)
            picks[pick] = picks.get(pick, 0) + 1
            same += pick == fold["picks"]["loes_auto"]
            new.append(fold[f"loes_{pick}"])
            old.append(fold["loes_auto"])
        d = 100 * (np.asarray(new) - np.asarray(old))
        rows.append(
            {
                "stack": f"{rec['model']} {rec['set']}",
                "role": rec["role"],
                "folds": len(d),
                "loo_auto": 100 * float(np.mean(new)),
                "cv_auto": 100 * float(np.mean(old)),
                "diff": float(d.mean()),
                "diff_se": float(d.std(ddof=1) / np.sqrt(d.size)),
                "same_pick": int(same),
                "picks": picks,
            }
        )
        print(rows[-1], flush=True)
    return rows


_EXTRACTORS = {}


def _fit_seconds(model, stack, y, fusion):
    from skloes.probe import LayerProbeClassifier

    probe = LayerProbeClassifier(model, max_length=64, fusion=fusion)
    if model not in _EXTRACTORS:  # the model loaded once per stack's model
        _EXTRACTORS[model] = probe._extractor().fit(["text"] * 2)
    extractor = _EXTRACTORS[model]
    routed = probe._routed_fit_params({})
    y = probe._check_y(y)  # as fit and fit_stack do first (classes_)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        probe._fit_stack(extractor, stack, y, routed)
    return time.perf_counter() - start, probe.fusion_


# The three stacks the 0.3 changelog timed the inner-CV chooser on (MiniLM,
# 2,000 texts: 13, 32 and 205 s per fit against 1.2, 2.3 and 3.9 s).
CHANGELOG_STACKS = [
    {"model": "minilm", "set": name, "n": 2000, "role": "changelog"}
    for name in ("rotten_tomatoes", "bbc_news", "chatterbot_langid")
]


def cost():
    from threadpoolctl import threadpool_limits

    rows = []
    for rec in [*_records(), *CHANGELOG_STACKS]:
        stack, y, _ = _stacks.stack(rec["model"], rec["set"], rec["n"], 64)
        stack = np.asarray(stack, dtype=np.float64)
        model = _stacks.MODELS[rec["model"]]
        trains = _outer_train(y, 1)
        ratios, seconds, picks, loads = [], [], {}, []
        with threadpool_limits(1):
            _fit_seconds(model, stack[:, trains[(0, 0)]], y[trains[(0, 0)]], "auto")
            for i in range(5):
                train = trains[(0, i)]
                arms = ["auto", "concatenate"][:: 1 if i % 2 == 0 else -1]
                loads.append(Path("/proc/loadavg").read_text().split()[0])
                got = {
                    arm: _fit_seconds(model, stack[:, train], y[train], arm)
                    for arm in arms
                }
                ratios.append(got["auto"][0] / got["concatenate"][0])
                seconds.append([got["auto"][0], got["concatenate"][0]])
                pick = got["auto"][1]
                picks[pick] = picks.get(pick, 0) + 1
        rows.append(
            {
                "stack": f"{rec['model']} {rec['set']}",
                "role": rec["role"],
                "ratio_median": float(np.median(ratios)),
                "ratio_min": float(np.min(ratios)),
                "ratio_max": float(np.max(ratios)),
                "auto_s_median": float(np.median([s[0] for s in seconds])),
                "concatenate_s_median": float(np.median([s[1] for s in seconds])),
                "picks": picks,
                "load_1min": loads,
            }
        )
        print(rows[-1], flush=True)
    return rows


def _markdown(result):
    lines = ['# `fusion="auto"` by closed-form leave-one-out scores (issue 41)', ""]
    lines += [
        "Written by `python benchmarks/bench_auto_cost.py`; protocol in its docstring.",
        "",
    ]
    acc = result.get("accuracy")
    if acc:
        lines += [
            "Held-out accuracy (%) of LOES's layers under each chooser, mean over "
            "the folds of the `bench_fusion.py` records; the difference, mean ± SE "
            "of the per-fold paired differences (points):",
            "",
            machine_line(result.get("machines", {}).get("accuracy")),
            "",
            "| stack | role | folds | auto, leave-one-out (now) | auto, inner CV "
            "(before) | now − before | same pick | picks now |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in acc:
            picks = ", ".join(f"{k} {v}" for k, v in sorted(r["picks"].items()))
            lines.append(
                f"| {r['stack']} | {r['role']} | {r['folds']} | {r['loo_auto']:.1f} "
                f"| {r['cv_auto']:.1f} | {r['diff']:+.2f} ± {r['diff_se']:.2f} "
                f"| {r['same_pick']}/{r['folds']} | {picks} |"
            )
        for role in ("choose", "check", None):
            part = [r for r in acc if role is None or r["role"] == role]
            d = np.array([r["diff"] for r in part])
            same = sum(r["same_pick"] for r in part)
            folds = sum(r["folds"] for r in part)
            se = d.std(ddof=1) / np.sqrt(d.size)
            lines.append(
                f"| mean of {role or 'all'} sets ({len(part)}) | | {folds} | | "
                f"| {d.mean():+.2f} ± {se:.2f} (worst {d.min():+.2f}) "
                f"| {same}/{folds} | |"
            )
        lines.append("")
    cost_rows = result.get("cost")
    if cost_rows:
        lines += [
            "Fit of `LayerProbeClassifier` on a stack (selection, fusion choice, "
            'head), the default over `fusion="concatenate"`, one thread, 5 folds '
            "interleaved; the ratio's median [min, max] over the folds:",
            "",
            machine_line(result.get("machines", {}).get("cost")),
            "",
            "| stack | role | auto / concatenate | auto s | concatenate s | "
            "auto's picks | load (1 min) |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in cost_rows:
            picks = ", ".join(f"{k} {v}" for k, v in sorted(r["picks"].items()))
            lines.append(
                f"| {r['stack']} | {r['role']} | {r['ratio_median']:.2f} "
                f"[{r['ratio_min']:.2f}, {r['ratio_max']:.2f}] "
                f"| {r['auto_s_median']:.2f} | {r['concatenate_s_median']:.2f} "
                f"| {picks} | {' '.join(r['load_1min'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", nargs="+", choices=["accuracy", "cost"], default=["accuracy"]
    )
    args = parser.parse_args(argv)
    path = RESULTS / "auto_cost.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    for part in args.part:
        result[part] = accuracy() if part == "accuracy" else cost()
        result.setdefault("machines", {})[part] = machine()
    path.write_text(json.dumps(result, indent=1))
    (RESULTS / "auto_cost.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
