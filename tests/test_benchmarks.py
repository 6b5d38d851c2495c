"""The benchmark registry: one command names the script behind every table."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _parts():
    name = "skloes_benchmarks_reproduce"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.PARTS


def test_every_reproduce_command_runs_a_script_of_the_folder():
    scripts = {argv[0] for p in _parts() for argv in [*p.full, *p.quick]}
    assert scripts, "the registry runs scripts"
    missing = sorted(s for s in scripts if not (BENCHMARKS / s).is_file())
    assert not missing


def test_every_result_table_names_the_part_that_writes_it():
    writes = " ".join(p.writes for p in _parts())
    tables = sorted(path.name for path in (BENCHMARKS / "results").glob("*.md"))
    assert "headline.md" in tables
    assert not [name for name in tables if name not in writes]


def test_quick_mode_never_writes_the_committed_results():
    quick = [" ".join(argv) for p in _parts() for argv in p.quick]
    assert quick, "some parts have a quick mode"
    assert not [argv for argv in quick if "benchmarks/results" in argv]
    for part in _parts():
        for argv in part.quick:
            if "--output" in argv:  # the scripts write to --output or next to it
                out = Path(argv[argv.index("--output") + 1])
                assert ".cache" in out.parts and "quick" in out.parts, argv


# The scripts that write only the feature caches under benchmarks/.cache (no
# figures): every other script that writes a file records the machine.
CACHE_WRITERS = {"_features.py", "_stacks.py"}
WRITES = {"write_text", "write_bytes", "write", "dump", "savez"}


def _script_facts(path):
    """(writes a file, refers to the results folder, imports _machine)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree))
    writes = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in WRITES
        for n in nodes
    )
    results = any(
        isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and (n.value == "results" or "benchmarks/results" in n.value)
        for n in nodes
    )
    helper = any(
        (isinstance(n, ast.ImportFrom) and n.module == "_machine")
        or (isinstance(n, ast.Import) and any(a.name == "_machine" for a in n.names))
        for n in nodes
    )
    return writes, results, helper


def test_every_script_that_writes_results_records_the_machine():
    scripts = sorted(BENCHMARKS.glob("*.py"))
    facts = {p.name: _script_facts(p) for p in scripts}
    assert facts["bench_precision.py"][:2] == (True, True), "the parser finds writes"
    missing = [
        name
        for name, (writes, results, helper) in facts.items()
        if (writes or results) and name not in CACHE_WRITERS and not helper
    ]
    assert not missing, f"write results without benchmarks/_machine.py: {missing}"
    assert not [name for name in CACHE_WRITERS if facts[name][1]]
    # ... and none describes the machine its own way.
    ad_hoc = ("platform.machine(", "platform.processor(", "os.cpu_count(", "cpuinfo")
    own = [
        p.name
        for p in scripts
        if p.name != "_machine.py" and any(s in p.read_text() for s in ad_hoc)
    ]
    assert not own, own


def test_every_result_table_names_its_cpu_or_says_it_was_not_recorded():
    tables = sorted((BENCHMARKS / "results").rglob("*.md"))
    assert tables
    silent = [
        str(p.relative_to(BENCHMARKS))
        for p in tables
        if "Measured on " not in p.read_text(encoding="utf-8")
        and "CPU not recorded" not in p.read_text(encoding="utf-8")
    ]
    assert not silent


def _machine_module():
    name = "skloes_benchmarks_machine"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "_machine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_machine_line_names_the_cpu_its_extensions_and_kernels(monkeypatch):
    from skloes.utils import _cpu

    flags = frozenset({"sse2", "avx2", "fma", "avx512f", "avx512_vnni"})
    monkeypatch.setattr(_cpu, "_flags", lambda: flags)
    monkeypatch.setattr(_cpu, "_model", lambda: "Test CPU 9000")
    for name in _cpu.CAPS:
        monkeypatch.delenv(name, raising=False)
    machine = _machine_module()
    monkeypatch.setattr(
        machine,
        "kernels",
        lambda: [
            {"library": "openmp", "version": None, "architecture": None},
            {"library": "openblas", "version": "0.3", "architecture": "SkylakeX"},
            {"library": "openblas", "version": "0.3", "architecture": "SkylakeX"},
            {"library": "torch", "version": "2", "architecture": "AVX512"},
        ],
    )
    record = machine.machine()
    summary = "Test CPU 9000 (AVX2, FMA, AVX-512, AVX-512 VNNI)"
    assert record["summary"] == summary
    assert record["extensions"] == ["AVX2", "FMA", "AVX-512", "AVX-512 VNNI"]
    assert record["int8_dot_product"] is True
    assert record["cores"] >= 1
    assert machine.machine_line(record) == (
        f"Measured on {summary}, {record['cores']} cores; "
        "kernels: OpenBLAS SkylakeX, torch AVX512."
    )
    monkeypatch.setattr(_cpu, "_flags", lambda: frozenset({"sse2"}))
    assert "(no AVX2)" in machine.machine()["summary"]
    # Records written before the helper: what they hold, and no more.
    assert machine.machine_line(None) == "CPU not recorded."
    assert machine.machine_line({"date": "2026-12-01"}) == "CPU not recorded."
    assert machine.machine_line("x86_64, 2 cores") == (
        "Measured on x86_64, 2 cores; CPU not recorded."
    )
    assert machine.machine_line({"cpu": "AMD EPYC"}) == (
        "Measured on AMD EPYC (vector extensions not recorded)."
    )
    assert machine.machine_lines([None, {}, record]).splitlines() == [
        "CPU not recorded.",
        machine.machine_line(record),
    ]


def test_machine_records_this_machine_as_json():
    import json

    machine = _machine_module()
    record = json.loads(json.dumps(machine.machine()))
    assert {"model", "extensions", "summary", "cores", "kernels"} <= set(record)
    assert machine.machine_line(record).startswith("Measured on ")


def _fusion_cv_module():
    name = "skloes_benchmarks_fusion_cv"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "_fusion_cv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fusion_cv_scores_each_fusion_by_the_heads_inner_folds():
    """The benchmarks' reference for ``fusion="auto"``: each fusion's mean
    score over inner folds, from the layers' out-of-fold outputs."""
    import numpy as np
    import pytest
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skloes.probe._ensemble import inner_folds

    rng = np.random.RandomState(0)
    y = np.repeat(["a", "b", "c"], 30)
    stack = rng.normal(size=(3, 90, 4))
    stack[0, :, 0] += 4.0 * (y == "b")
    stack[2, :, 1] += 4.0 * (y == "c")
    flat = stack.transpose(1, 0, 2).reshape(90, -1)
    folds = inner_folds(y, "classification", 5, 0)
    head = make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=1000))
    scores, oof = _fusion_cv_module().fusion_cv(
        head, flat, y, folds, layer_dim=4, classes=np.unique(y)
    )
    assert list(scores) == ["concatenate", "average", "stack"]
    assert oof.shape == (3, 90, 3)
    # the average's score is the accuracy of the mean out-of-fold probability
    mean = oof.mean(axis=0)
    by_fold = [
        np.mean(np.unique(y)[mean[test].argmax(axis=1)] == y[test]) for _, test in folds
    ]
    assert scores["average"] == pytest.approx(np.mean(by_fold))
