"""Every gallery example runs, offline, start to finish, so none can rot."""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))
# Each example takes under a minute on 2 idle CPU cores; the limit leaves room
# for a busy machine.
TIMEOUT_S = 420


def test_gallery_has_the_examples_the_docs_promise():
    names = {path.stem for path in EXAMPLES}
    promised = {  # the seven examples of the issue, linked from the user guide
        "plot_layer_profile", "plot_grid_search_cache", "plot_loes_cv_budget",
        "plot_loes_vs_baselines", "plot_georeg_head", "plot_layer_metrics",
        "plot_tabular_probing",
    }
    assert promised <= names
    guide = "".join(p.read_text() for p in (ROOT / "doc").rglob("*.rst"))
    for name in promised:
        assert f"sphx_glr_auto_examples_{name}.py" in guide, f"link {name}"
    assert (ROOT / "examples" / "README.txt").is_file()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_follows_the_gallery_format(path):
    text = path.read_text()
    title = text.split('"""')[1].strip().splitlines()
    assert set(title[0]) == {"="} and set(title[2]) == {"="}, "=== title block"
    assert "SPDX-License-Identifier: BSD-3-Clause" in text
    assert "# %%" in text


@pytest.mark.integration
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, tmp_path, minilm_path):
    pytest.importorskip("matplotlib")
    env = dict(os.environ, MPLBACKEND="Agg", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    code = f"import runpy; runpy.run_path({str(path)!r}, run_name='__main__')"
    start = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT_S,
                             check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name} ran longer than {TIMEOUT_S} s")
    elapsed = time.perf_counter() - start
    assert res.returncode == 0, f"{path.name} failed:\n{res.stderr[-5000:]}"
    assert "Traceback" not in res.stderr
    print(f"{path.name}: {elapsed:.1f} s")
