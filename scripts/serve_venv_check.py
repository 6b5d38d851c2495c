"""Torch-free serving from the light install alone (CI: ``.ci/run``).

Here, in the full environment: the default probe and one probe of each
fusion (and one per-layer non-linear head, a skops archive) on a tiny random
BERT, exported in int8, with their predictions. Then a plain virtual
environment (no system site packages: torch and transformers are not in it)
gets ``pip install -e .[serve]`` and nothing else, loads every folder with
:func:`skloes.serving.load_exported` and must predict the same, importing
neither torch, transformers nor ``skloes.heads``.

Usage::

    python scripts/serve_venv_check.py          # the whole check
    python scripts/serve_venv_check.py --keep   # keep the venv under /tmp
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The probe tests' reviews (tests/_support/texts.py), and one text more to predict.
sys.path.insert(0, str(ROOT / "tests"))
from _support.texts import NEW as _NEW  # noqa: E402
from _support.texts import TEXTS, Y  # noqa: E402

NEW = [*_NEW, "it was quite fun"]

SERVE = """
import importlib.util, json, sys
for name in ("torch", "transformers"):
    assert importlib.util.find_spec(name) is None, name + " is installed here"
import numpy as np
from skloes.serving import load_exported
expected = json.loads(open(sys.argv[1]).read())
texts = json.loads(sys.argv[2])
for folder, (labels, proba) in expected.items():
    p = load_exported(folder)
    assert p.predict(texts).tolist() == labels, folder
    np.testing.assert_allclose(p.predict_proba(texts), proba, atol=1e-5)
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")]
assert not loaded and "skloes.heads" not in sys.modules, loaded
print(f"served {len(expected)} exported probes without torch")
"""


def export(work):
    """The folders and their predictions here (``{folder: (labels, proba)}``)."""
    sys.path.insert(0, str(ROOT))  # this checkout's skloes, as the venv's
    import numpy as np
    from sklearn.neighbors import KNeighborsClassifier

    from skloes.models._testing import make_tiny_model
    from skloes.probe import LayerProbeClassifier, save_probe
    from skloes.selection import MetricTopKSelector
    from skloes.serving import load_exported

    model = make_tiny_model(work / "model", num_hidden_layers=4)
    scores = np.full(5, -1.0)
    scores[[1, 3]] = 1.0
    kinds = {"default": {}, **{f: {"fusion": f} for f in ("average", "stack")}}
    kinds["concatenate"] = {"fusion": "concatenate"}
    kinds["skops"] = {
        "fusion": "average",
        "estimator": KNeighborsClassifier(3, algorithm="brute"),
    }
    expected = {}
    for name, params in kinds.items():
        selector = MetricTopKSelector(
            metric="layer_scores", n_layers_to_select=2, layer_scores=scores
        )
        probe = LayerProbeClassifier(
            model, selector=selector, random_state=0, **params
        ).fit(TEXTS, Y)
        folder = save_probe(probe, work / name, export="onnx-int8", check_texts=TEXTS)
        served = load_exported(folder)
        expected[str(folder)] = [
            served.predict(NEW).tolist(),
            served.predict_proba(NEW).tolist(),
        ]
    return expected


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="skloes-serve-venv-"))
    try:
        start = time.perf_counter()
        expected = export(work)
        (work / "expected.json").write_text(json.dumps(expected))
        exported = time.perf_counter()
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "-e", ".[serve]"],
            check=True,
            cwd=ROOT,
            env=env,
        )
        installed = time.perf_counter()
        subprocess.run(
            [python, "-c", SERVE, str(work / "expected.json"), json.dumps(NEW)],
            check=True,
            cwd=work,  # not the checkout: the installed skloes
            env=env,
        )
        print(
            f"serve venv check: export {exported - start:.0f} s, venv and pip "
            f"install {installed - exported:.0f} s, serving "
            f"{time.perf_counter() - installed:.0f} s"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
