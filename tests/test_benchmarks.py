"""The benchmark registry: one command names the script behind every table."""

from __future__ import annotations

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
