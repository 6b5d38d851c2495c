"""Does choosing the probe's strength by inner CV change the comparison?

For each layer stack (``benchmarks/_stacks.py``) and three answers (the last
layer, four layers spread over the depth, all layers), 5-fold stratified CV
(seed 0) of ``StandardScaler`` + the head: ``LogisticRegression(C=0.01)`` (the
house probe) against ``LogisticRegressionCV`` over ``C`` in {0.001, 0.01,
0.1} (3 inner folds, warm-started path, refit on the fold's training rows).
Prints accuracy and fit seconds per arm (arms interleaved in one process;
indicative on a shared machine).

    python benchmarks/bench_head.py --runs minilm:trec6:1000 \
        smollm2:rotten_tomatoes:2000:500
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _stacks  # noqa: E402
from _machine import machine, machine_line  # noqa: E402

CS = (0.001, 0.01, 0.1)


def heads():
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

    return {
        "C=0.01": lambda: LogisticRegression(C=0.01, max_iter=1000),
        "inner CV": lambda: LogisticRegressionCV(Cs=list(CS), cv=3, max_iter=1000),
    }


def answers(L):
    four = sorted({round(v) for v in np.linspace(L / 4, L - 1, 4)})
    return {"last": [L - 1], "four": four, "all": list(range(L))}


def run(model, name, n, rows):
    from sklearn.model_selection import StratifiedKFold, cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    stack, y, _ = _stacks.stack(model, name, n, 64)
    stack, y = _stacks.subsample(stack, y, rows)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    for answer, layers in answers(stack.shape[0]).items():
        X = np.concatenate([stack[l] for l in layers], axis=1)
        for head, make in heads().items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = cross_validate(
                    make_pipeline(StandardScaler(), make()),
                    X,
                    y,
                    cv=cv,
                    scoring="accuracy",
                    return_estimator=True,
                )
            seconds = time.perf_counter() - start
            Cs = [
                float(np.ravel(e[-1].C_)[0])
                for e in out["estimator"]
                if hasattr(e[-1], "C_")
            ]
            print(
                f"| {model} | {name} | {answer} ({len(layers)}) | {head} | "
                f"{100 * out['test_score'].mean():.1f} | {seconds:.1f} | "
                f"{', '.join(f'{c:g}' for c in Cs)} |",
                flush=True,
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="model:set:n[:rows]")
    args = parser.parse_args(argv)
    print(machine_line(machine()) + "\n")
    print(
        "| model | set | answer (layers) | head | acc % | fit s (5 folds) "
        "| C per fold |"
    )
    print("|---|---|---|---|---|---|---|")
    for spec in args.runs:
        model, name, n, *rows = spec.split(":")
        run(model, name, int(n), int(rows[0]) if rows else None)


if __name__ == "__main__":
    main()
