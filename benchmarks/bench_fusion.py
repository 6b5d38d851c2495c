"""How the chosen layers are combined: one head on their concatenation, or one
probe per layer averaged or stacked (issue 36).

For each layer stack (``benchmarks/_stacks.py``: mean-pooled, max_length 64)
and each fold of ``--repeats`` x 5-fold stratified outer cross-validation
(repeat ``r`` shuffled with seed ``r``), everything is fitted on the outer
training rows only, and scored (accuracy) on the held-out rows:

- one house probe per layer (``StandardScaler`` + ``LogisticRegression(C=0.01)``)
  fitted on the training rows, and its out-of-fold probabilities from 5
  inner folds of the training rows (:class:`~skloes.probe.LayerEnsembleClassifier`'s
  own helpers, so ``combine="stack"`` is exactly what is scored);
- the layer sets: LOES (``LOESSelector(random_state=0)``, 4 layers), all
  layers, the last 4 layers; the last layer, and the best single layer chosen
  by the inner CV of the same per-layer probes;
- each layer set under each fusion: ``concatenate`` (one house probe on the
  concatenated layers), ``average`` (the mean of the per-layer probes'
  probabilities) and ``stack`` (a ``LogisticRegression(C=1)`` meta model on
  their out-of-fold probabilities); for LOES also ``auto``, the fusion of the
  best inner-CV score (the concatenation's over the same inner folds).

Raw per-fold numbers go to ``benchmarks/results/fusion/{model}_{set}.json``
and ``--summarize`` writes the tables of ``benchmarks/results/fusion.md`` and
the per-set table of the user guide (``doc/user_guide/selection.rst``,
between its ``bench_fusion`` markers):
mean accuracy and, for each difference, the mean of the per-fold paired
differences with its standard error (standard deviation over the
``5 x repeats`` folds / sqrt of their number; folds of one repeat share rows,
so this understates the error somewhat: a repeat-level error is given too).

    python benchmarks/bench_fusion.py --models minilm --sets rotten_tomatoes ...
    python benchmarks/bench_fusion.py --summarize

A record without the ``*_auto`` arms of every layer set (an earlier run) is
left out of the summary: rerun it.
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
from _machine import machine, machine_lines  # noqa: E402

OUT = Path(__file__).parent / "results" / "fusion"
SUBSETS = ("loes", "all", "last4")
FUSIONS = ("concatenate", "average", "stack")
# Sets the default was chosen on, and those only checked afterwards.
CHOOSE_SETS = ("rotten_tomatoes", "trec6", "vader_tweets3", "vader_nyt3")
CHECK_SETS = ("vader_amazon3", "chatterbot_topics", "warriner_valence3")


def house():
    from skloes.probe._house import house_probe

    return house_probe("classification")


def _acc(proba, classes, y):
    return float(np.mean(classes[np.argmax(proba, axis=1)] == y))


def _fold(stack, y, train, test, seed):
    from _fusion_cv import concat_fold, fusion_scores
    from sklearn.linear_model import LogisticRegression

    from skloes.core._fusion import choose_fusion, meta_features
    from skloes.probe._ensemble import _oof_one, inner_folds, layer_outputs
    from skloes.selection import LOESSelector

    L = stack.shape[0]
    classes = np.unique(y)
    ytr, yte = y[train], y[test]
    inner = inner_folds(ytr, "classification", 5, seed)
    out, seconds = {}, {}
    start = time.perf_counter()
    P_te, P_oof = [], []
    for layer in range(L):
        Xtr, Xte = stack[layer][train], stack[layer][test]
        P_te.append(layer_outputs(house().fit(Xtr, ytr), Xte, classes))
        P_oof.append(_oof_one(house(), Xtr, ytr, inner, classes, {}))
    P_te, P_oof = np.asarray(P_te), np.asarray(P_oof)
    seconds["per_layer"] = time.perf_counter() - start
    start = time.perf_counter()
    loes = LOESSelector(random_state=0).fit(stack[:, train], ytr)
    seconds["loes_select"] = time.perf_counter() - start
    inner_acc = np.array([_acc(P_oof[l], classes, ytr) for l in range(L)])
    best = int(np.argmax(inner_acc))
    out["last"] = _acc(P_te[-1], classes, yte)
    out["best_single"] = _acc(P_te[best], classes, yte)
    picks = {"loes": [int(v) for v in loes.selected_layers_], "best_single": best}
    layer_sets = {
        "loes": sorted(picks["loes"]),
        "all": list(range(L)),
        "last4": list(range(max(0, L - 4), L)),
    }

    def concat(layers, rows):
        return np.concatenate([stack[l][rows] for l in layers], axis=1)

    def meta(P, layers):
        return meta_features(P[layers], classes)

    for name, layers in layer_sets.items():
        start = time.perf_counter()
        model = house().fit(concat(layers, train), ytr)
        out[f"{name}_concatenate"] = float(model.score(concat(layers, test), yte))
        seconds[f"{name}_concatenate"] = time.perf_counter() - start
        out[f"{name}_average"] = _acc(P_te[layers].mean(axis=0), classes, yte)
        start = time.perf_counter()
        final = LogisticRegression(C=1.0, max_iter=1000).fit(meta(P_oof, layers), ytr)
        out[f"{name}_stack"] = float(final.score(meta(P_te, layers), yte))
        seconds[f"{name}_stack_meta"] = time.perf_counter() - start
        # auto: the library's inner-CV choice on the training rows (the
        # per-layer out-of-fold outputs above are its own: same probe, folds)
        start = time.perf_counter()
        Xtr = concat(layers, train)
        concat_inner = np.mean(
            [concat_fold(house(), Xtr, ytr, a, b, classes, {}) for a, b in inner]
        )
        scores = fusion_scores(
            P_oof[layers], ytr, inner, classes, concatenate=concat_inner
        )
        chosen = choose_fusion(scores)
        seconds[f"{name}_auto_inner"] = time.perf_counter() - start
        out[f"{name}_auto"] = out[f"{name}_{chosen}"]
        picks[f"{name}_auto"] = chosen
        picks[f"{name}_auto_inner"] = scores
    picks["auto"] = picks["loes_auto"]
    seconds["auto_inner"] = seconds["loes_auto_inner"]
    return out, picks, seconds


def run(model, name, n, max_length, repeats):
    from sklearn.model_selection import StratifiedKFold

    stack, y, meta = _stacks.stack(model, name, n, max_length)
    stack = np.asarray(stack, dtype=np.float64)
    folds = []
    for r in range(repeats):
        splitter = StratifiedKFold(5, shuffle=True, random_state=r)
        for i, (train, test) in enumerate(splitter.split(np.zeros((y.size, 1)), y)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores, picks, seconds = _fold(stack, y, train, test, seed=100 * r + i)
            folds.append(
                {"repeat": r, "fold": i, **scores, "picks": picks, "seconds": seconds}
            )
            print(
                model,
                name,
                r,
                i,
                {k: round(v, 3) for k, v in scores.items()},
                picks["auto"],
                flush=True,
            )
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{model}_{name}.json"
    record = {
        "model": model,
        "set": name,
        "n": int(y.size),
        "n_layers": int(stack.shape[0]),
        "dim": int(stack.shape[2]),
        "repeats": repeats,
        "role": "choose" if name in CHOOSE_SETS else "check",
        "folds": folds,
        "machine": machine(),
    }
    path.write_text(json.dumps(record, indent=1))
    return path


def _diff(folds, a, b, repeats):
    d = np.array([f[a] - f[b] for f in folds]) * 100
    se = d.std(ddof=1) / np.sqrt(d.size)
    per_repeat = np.array(
        [d[[f["repeat"] == r for f in folds]].mean() for r in range(repeats)]
    )
    se_r = per_repeat.std(ddof=1) / np.sqrt(repeats) if repeats > 1 else np.nan
    return float(d.mean()), float(se), float(se_r)


ARMS = (
    "last",
    "best_single",
    "all_concatenate",
    "all_average",
    "all_stack",
    "all_auto",
    "last4_concatenate",
    "last4_average",
    "last4_stack",
    "last4_auto",
    "loes_concatenate",
    "loes_average",
    "loes_stack",
    "loes_auto",
)


def _records(paths):
    """The complete records (every arm of :data:`ARMS`), by role, model, set."""
    records = [json.loads(Path(p).read_text()) for p in sorted(paths)]
    records = [r for r in records if all(a in r["folds"][0] for a in ARMS)]
    records.sort(key=lambda r: (r["role"], r["model"], r["set"]))
    return records


COMPARISONS = (
    ("loes_average", "loes_concatenate"),
    ("loes_stack", "loes_concatenate"),
    ("loes_auto", "loes_concatenate"),
    ("loes_auto", "loes_average"),
    ("all_auto", "all_concatenate"),
    ("last4_auto", "last4_concatenate"),
    ("loes_auto", "best_single"),
    ("loes_concatenate", "best_single"),
    ("loes_auto", "last"),
    ("loes_auto", "all_concatenate"),
    ("all_auto", "last"),
)


def summarize(paths):
    records = _records(paths)
    lines = [
        "| stack | role | rows | L | "
        + " | ".join(a.replace("_", " ") for a in ARMS)
        + " |",
        "|" + "---|" * (4 + len(ARMS)),
    ]
    for r in records:
        f = r["folds"]
        cells = [f"{100 * np.mean([x[a] for x in f]):.1f}" for a in ARMS]
        lines.append(
            f"| {r['model']} {r['set']} | {r['role']} | {r['n']} | {r['n_layers']} | "
            + " | ".join(cells)
            + " |"
        )
    table = "\n".join(lines)
    comparisons = COMPARISONS
    head = "| stack | role | " + " | ".join(f"{a} − {b}" for a, b in comparisons) + " |"
    rows = [head, "|" + "---|" * (2 + len(comparisons))]
    means = {c: {"choose": [], "check": []} for c in comparisons}
    for r in records:
        cells = []
        for a, b in comparisons:
            m, se, _ = _diff(r["folds"], a, b, r["repeats"])
            means[(a, b)][r["role"]].append(m)
            cells.append(f"{m:+.1f} ± {se:.1f}")
        rows.append(
            f"| {r['model']} {r['set']} | {r['role']} | " + " | ".join(cells) + " |"
        )
    for role in ("choose", "check"):
        cells = []
        for c in comparisons:
            v = np.array(means[c][role])
            se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else np.nan
            cells.append(f"{v.mean():+.2f} ± {se:.2f}" if v.size else "-")
        rows.append(f"| mean of {role} sets | | " + " | ".join(cells) + " |")
    auto = []
    for r in records:
        cells = []
        for name in SUBSETS:
            chosen = [x["picks"][f"{name}_auto"] for x in r["folds"]]
            cells.append(", ".join(f"{fu} {chosen.count(fu)}" for fu in FUSIONS))
        secs = {
            k: np.median([x["seconds"][k] for x in r["folds"]])
            for k in (
                "per_layer",
                "loes_concatenate",
                "all_concatenate",
                "loes_auto_inner",
                "all_auto_inner",
            )
        }
        auto.append(
            f"| {r['model']} {r['set']} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(f"{v:.2f}" for v in secs.values())
            + " |"
        )
    auto_table = "\n".join(
        [
            "| stack | auto's pick, LOES | auto's pick, all | auto's pick, last 4 | "
            "per-layer probes s | LOES concatenated s | all concatenated s | "
            "LOES auto inner s | all auto inner s |",
            "|---|---|---|---|---|---|---|---|---|",
            *auto,
        ]
    )
    return (
        machine_lines(r.get("machine") for r in records)
        + "\n\nHeld-out accuracy (%), mean over the folds:\n\n"
        + table
        + "\n\nPaired differences (points), mean ± standard error over the folds "
        "(the mean rows: ± the standard error over the stacks):\n\n"
        + "\n".join(rows)
        + "\n\nThe fusion ``auto`` chose in each fold, and the median seconds of "
        "one fold's fits (one thread; load-dependent):\n\n" + auto_table + "\n"
    )


HEADER = """# Fusion of the chosen layers (issue 36)

Written by `python benchmarks/bench_fusion.py --summarize` from the raw
per-fold records in `results/fusion/` (a record without every arm of the
current script is left out). Protocol: the script's docstring; stacks from
`benchmarks/_stacks.py` (MiniLM and mpnet 1,000 texts, SmolLM2 500,
max_length 64, mean pooling); MiniLM 3 x 5 folds, SmolLM2 and mpnet 2 x 5.
Roles: the default was chosen on `choose` sets; `check` sets were read only
afterwards. Accuracy does not depend on the machine's load; the seconds do
(2 shared cores; load average {load} when summarized).

"""
FUSION_ARMS = ("loes_concatenate", "loes_average", "loes_stack", "loes_auto")
GUIDE_BEGIN = (
    ".. bench_fusion table: begin (python benchmarks/bench_fusion.py --summarize)"
)
GUIDE_END = ".. bench_fusion table: end"
GUIDE = Path(__file__).parents[1] / "doc" / "user_guide" / "selection.rst"


def guide_table(paths):
    """The user guide's list-table (doc/user_guide/selection.rst): LOES's
    layers under each fusion per set, the differences to concatenation with
    their standard errors, and the mean over the choose and the check sets."""
    records = _records(paths)
    head = [
        "stack (rows, layers)",
        "role",
        "concatenated",
        "averaged",
        "stacked",
        "auto",
        "averaged − concatenated",
        "stacked − concatenated",
        "auto − concatenated",
        "auto − best single",
    ]
    diffs = [(a, "loes_concatenate") for a in FUSION_ARMS[1:]]
    diffs.append(("loes_auto", "best_single"))
    body = []
    means = {role: [] for role in ("choose", "check")}
    for r in records:
        f = r["folds"]
        acc = [100 * np.mean([x[a] for x in f]) for a in FUSION_ARMS]
        d = [_diff(f, a, b, r["repeats"])[:2] for a, b in diffs]
        means[r["role"]].append([*acc, *(m for m, _ in d)])
        body.append(
            [
                f"{r['model']} {r['set']} ({r['n']}, {r['n_layers']})",
                r["role"],
                *(f"{v:.1f}" for v in acc),
                *(f"{m:+.1f} ± {se:.1f}" for m, se in d),
            ]
        )
    for role, values in means.items():
        if not values:
            continue
        v = np.asarray(values)
        se = v.std(axis=0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else v * np.nan
        n_acc = len(FUSION_ARMS)
        body.append(
            [
                f"mean of the {len(v)} {role} stacks",
                role,
                *(f"{m:.1f}" for m in v.mean(axis=0)[:n_acc]),
                *(
                    f"{m:+.2f} ± {s:.2f}"
                    for m, s in zip(v.mean(axis=0)[n_acc:], se[n_acc:], strict=True)
                ),
            ]
        )
    lines = [GUIDE_BEGIN, "", ".. list-table::", "   :header-rows: 1", ""]
    for row in [head, *body]:
        lines.append("   * - " + row[0])
        lines += [f"     - {cell}" for cell in row[1:]]
    lines += ["", GUIDE_END]
    return "\n".join(lines)


def write_guide(paths, guide=GUIDE):
    """Replace the table between the markers of the user guide."""
    text = guide.read_text(encoding="utf-8")
    begin, end = text.index(GUIDE_BEGIN), text.index(GUIDE_END) + len(GUIDE_END)
    guide.write_text(text[:begin] + guide_table(paths) + text[end:], encoding="utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm"])
    parser.add_argument("--sets", nargs="+", default=[*CHOOSE_SETS, *CHECK_SETS])
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args(argv)
    if args.summarize:
        paths = sorted(OUT.glob("*.json"))
        text = HEADER.format(load=" ".join(open("/proc/loadavg").read().split()[:3]))
        text += summarize(paths)
        (OUT.parent / "fusion.md").write_text(text, encoding="utf-8")
        print(text)
        write_guide(paths)
        print(f"\n(fusion.md and the table of {GUIDE} rewritten)")
        return
    for model in args.models:
        n = args.n or (500 if model == "smollm2" else 1000)
        for name in args.sets:
            print(run(model, name, n, args.max_length, args.repeats), flush=True)


if __name__ == "__main__":
    main()
