"""The command line: every option of ``skloes probe`` and ``skloes predict``,
the data files they read (columns, encodings, byte-order marks, numeric
texts, rows left out), the task, and ``skloes cache`` on a missing folder.

New in issue 34 (the section at the end): a former option given with its
new name, and ``skloes predict``'s options on an exported folder and on a
weight-free one. (A full disk under ``skloes probe --save``:
test_saving.py.)
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from _support.outcomes import cli_error  # noqa: E402
from _support.texts import PROBE_NEW, random_reviews  # noqa: E402

from skloes.cli import main  # noqa: E402
from skloes.probe import LayerProbeRegressor, load_probe  # noqa: E402

CLI_BUDGET = "--n-layers-to-select"  # skloes probe (was --k)


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------
def _csv(path, text):
    path.write_text(text)
    return str(path)


CLI_CASES = [
    ("batch_size_0", ["--batch-size", "0"], "--batch-size"),
    ("batch_size_word", ["--batch-size", "many"], "--batch-size"),
    ("max_length_0", ["--max-length", "0"], "--max-length"),
    ("max_length_neg", ["--max-length", "-4"], "--max-length"),
    ("max_length_no_room", ["--max-length", "2"], r"`--max-length` must be at least 3"),
    ("budget_0", [CLI_BUDGET, "0"], CLI_BUDGET),
    ("budget_word", [CLI_BUDGET, "some"], CLI_BUDGET),
    ("max_samples_9", ["--max-samples", "9"], "--max-samples"),
    ("seed_word", ["--seed", "x"], "--seed"),
    ("pooling", ["--pooling", "median"], "--pooling"),
    ("device_bogus", ["--device", "gpu9"], "device"),
    ("device_cuda_99", ["--device", "cuda:99"], "device"),
    ("model_missing", ["--model", "/nowhere/model"], "does not exist"),
    ("data_unknown", ["--data", "imdb"], "unknown data set"),
    ("data_missing_file", ["--data", "missing.csv"], "does not exist"),
    ("data_bad_extension", ["--data", "{tmp}/d.xlsx"], "unknown extension"),
    ("data_empty_file", ["--data", "{tmp}/empty.csv"], "cannot read"),
    ("data_header_only", ["--data", "{tmp}/header.csv"], "no row"),
    (
        "data_no_text_column",
        ["--data", "{tmp}/ok.csv", "--text-column", "body"],
        "--text-column",
    ),
    (
        "data_no_label_column",
        ["--data", "{tmp}/ok.csv", "--label-column", "y"],
        "--label-column",
    ),
    ("data_one_class", ["--data", "{tmp}/one_class.csv"], "single class"),
    ("data_labels_missing", ["--data", "{tmp}/no_labels.csv"], "no row"),
    ("data_bad_json", ["--data", "{tmp}/bad.jsonl"], "cannot read"),
    ("data_a_folder", ["--data", "{tmp}/afolder.csv"], "cannot read|is a folder"),
    ("model_a_file", ["--model", "{tmp}/ok.csv"], "is a file, not a model folder"),
    (
        "model_remote_code",
        ["--model", "{remote}"],
        "skloes probe does not run a model's own code",
    ),
    (
        "data_the_model_cannot_tell_apart",
        ["--data", "{tmp}/unknown_words.csv"],
        r"cannot probe .*no candidate layers",
    ),
    ("out_a_file", ["--out", "{tmp}/ok.csv"], "--out"),
    ("out_existing_report", ["--out", "{tmp}/report"], "--force"),
    ("unknown_option", ["--frobnicate"], "unrecognized arguments"),
]


@pytest.fixture
def cli_files(tmp_path):
    _csv(tmp_path / "d.xlsx", "x")
    _csv(tmp_path / "empty.csv", "")
    _csv(tmp_path / "header.csv", "text,label\n")
    _csv(tmp_path / "ok.csv", "text,label\n" + "a b,0\nc d,1\n" * 6)
    _csv(tmp_path / "unknown_words.csv", "text,label\n" + "zzz,0\nqqq,1\n" * 6)
    _csv(tmp_path / "one_class.csv", "text,label\n" + "a b,0\n" * 12)
    _csv(tmp_path / "no_labels.csv", "text,label\n" + "a b,\n" * 12)
    _csv(tmp_path / "bad.jsonl", '{"text": "a", "label": 0}\n{"text": ')
    (tmp_path / "afolder.csv").mkdir()
    (tmp_path / "report").mkdir()
    _csv(tmp_path / "report" / "selection.json", "{}")
    return tmp_path


@pytest.mark.parametrize(
    "argv, needle", [pytest.param(a, n, id=i) for i, a, n in CLI_CASES]
)
def test_cli_options(cli_files, tiny_model_path, broken_models, capsys, argv, needle):
    from skloes.cli import main

    argv = [
        a.replace("{tmp}", str(cli_files)).replace(
            "{remote}", str(broken_models / "remote")
        )
        for a in argv
    ]
    if "--model" not in argv:
        argv = ["--model", tiny_model_path, *argv]
    if "--out" not in argv:
        argv = [*argv, "--out", str(cli_files / "fresh")]
    status = main(["probe", *argv])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err_lines
    # one error line (progress bars of a run that got far may precede it)
    errors = [line for line in err_lines if "error:" in line]
    assert len(errors) == 1 and re.search(needle, errors[0]), err_lines
    assert not any("Traceback" in line for line in err_lines)
    assert not (cli_files / "fresh").exists()  # nothing written on failure


# --------------------------------------------------------------------------
# The CLI's data: a text column holding anything but
# strings is refused (as the Python API refuses it), the texts are read as
# the file holds them, left-out rows are counted, `cache info` on a missing
# folder says so.
# --------------------------------------------------------------------------
def _jsonl(path, texts, labels=None):
    import json

    labels = labels if labels is not None else [i % 2 for i in range(len(texts))]
    path.write_text(
        "".join(
            json.dumps({"text": t, "label": y}) + "\n"
            for t, y in zip(texts, labels, strict=True)
        )
    )
    return path


NON_TEXT = {
    "lists": [["a", "b"]] * 12,
    "dicts": [{"a": 1}] * 12,
    "booleans": [True, False] * 6,
    "numbers": list(range(12)),
    "one_list_among_texts": ["a b"] * 7 + [["x"]] + ["c d"] * 4,
    "nested_null": [None] * 2 + [[None]] * 10,
}


@pytest.mark.parametrize("case", list(NON_TEXT))
def test_cli_text_column_of_non_text_is_refused(
    tmp_path, tiny_model_path, capsys, case
):
    from skloes.cli import main

    data = _jsonl(tmp_path / "d.jsonl", NON_TEXT[case])
    status = main(
        [
            "probe",
            "--model",
            tiny_model_path,
            "--data",
            str(data),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2, lines
    assert re.search(
        r"error: --text-column 'text' .* not text \(row \d+: "
        r"(list|dict|bool|int)",
        lines[-1],
    ), lines
    assert not (tmp_path / "out").exists()


def test_cli_parquet_text_column_of_lists_is_refused(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from skloes.cli._args import UserError
    from skloes.cli._data import load_data

    path = tmp_path / "d.parquet"
    pd.DataFrame({"text": [["a"], ["b"]] * 6, "label": [0, 1] * 6}).to_parquet(path)
    with pytest.raises(UserError, match=r"--text-column 'text'.*not text"):
        load_data(str(path), "text", "label", None, 0)


TEXT_AS_WRITTEN = [  # (id, file name, file text, the first text read)
    ("csv_leading_zeros", "d.csv", "text,label\n" + "007,0\n0042,1\n" * 6, "007"),
    (
        "csv_number_with_missing",
        "d.csv",
        "text,label\n1,0\n,1\n" + "2,0\n3,1\n" * 6,
        "1",
    ),
    ("jsonl_date_string", "d.jsonl", None, "2020-01-01"),
    ("jsonl_numeric_string", "d.jsonl", None, "1e3"),
]


@pytest.mark.parametrize(
    "name, text, first",
    [pytest.param(*case[1:], id=case[0]) for case in TEXT_AS_WRITTEN],
)
def test_cli_texts_are_read_as_written(tmp_path, name, text, first):
    from skloes.cli._data import load_data

    path = tmp_path / name
    if text is None:
        _jsonl(path, [first, "a b"] * 6)
    else:
        path.write_text(text)
    texts, *_ = load_data(str(path), "text", "label", None, 0)
    assert texts[0] == first and isinstance(texts[0], str)


DROPPED_ROWS = [  # (id, file text, rows left out, rows in all)
    ("missing_texts", "text,label\n" + ",0\n,1\n" + "a b,0\nc d,1\n" * 6, 2, 14),
    ("missing_labels", "text,label\n" + "a b,\n" * 3 + "a b,0\nc d,1\n" * 6, 3, 15),
    ("both", "text,label\n,\n" + "a b,0\nc d,1\n" * 6, 1, 13),
]


@pytest.mark.parametrize(
    "text, dropped, total",
    [pytest.param(*case[1:], id=case[0]) for case in DROPPED_ROWS],
)
def test_cli_rows_left_out_are_counted(tmp_path, capsys, text, dropped, total):
    from skloes.cli._data import load_data

    (tmp_path / "d.csv").write_text(text)
    texts, *_ = load_data(str(tmp_path / "d.csv"), "text", "label", None, 0)
    assert len(texts) == total - dropped
    assert re.search(
        rf"note: {dropped} of {total} rows .* left out", capsys.readouterr().err
    )


def test_cli_no_row_left_out_says_nothing(tmp_path, capsys):
    from skloes.cli._data import load_data

    (tmp_path / "d.csv").write_text("text,label\n" + "a b,0\nc d,1\n" * 6)
    load_data(str(tmp_path / "d.csv"), "text", "label", None, 0)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("action", [["info"], ["prune", "--max-bytes", "0"]])
def test_cli_cache_on_a_missing_folder_says_so(tmp_path, capsys, action):
    from skloes.cli import main

    missing = str(tmp_path / "nowhere")
    assert main(["cache", action[0], missing, *action[1:]]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0], lines
    assert not os.path.exists(missing)


def _write(path, header, rows, sep=","):
    lines = [sep.join(header)] + [sep.join(map(str, row)) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


HEAD_CASES = [  # (head, header, a note on stderr)
    ("logistic", ["prediction", "proba_neg", "proba_pos"], False),
    ("linear_svc", ["prediction"], True),
    ("ridge_classifier", ["prediction"], True),
    ("svc_no_probability", ["prediction"], True),
    ("regressor", ["prediction"], False),
]


@pytest.mark.parametrize(
    "head, header, note", [pytest.param(h, c, n, id=h) for h, c, n in HEAD_CASES]
)
def test_skloes_predict_with_any_head(
    saved_probes, tmp_path, capsys, head, header, note
):
    probe, folder = saved_probes[head]
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    assert main(["predict", str(folder), "--data", data]) == 0
    captured = capsys.readouterr()
    rows = captured.out.strip().splitlines()
    assert rows[0].split(",") == header
    expected = probe.predict(PROBE_NEW)
    got = [row.split(",")[0] for row in rows[1:]]
    if head == "regressor":
        np.testing.assert_allclose(np.array(got, float), expected, rtol=1e-5)
    else:
        assert got == [str(v) for v in expected]
    assert ("gives no probabilities; writing predictions only" in captured.err) is note


def test_predict_options_device_and_batch_size(saved_probes, tmp_path, capsys):
    probe, folder = saved_probes["logistic"]
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    argv = [
        "predict",
        str(folder),
        "--data",
        data,
        "--device",
        "cpu",
        "--batch-size",
        "1",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("prediction,proba_")
    cli_error([*argv[:4], "--device", "gpu9"], r"device", capsys)


# Byte-order marks and encodings, read by skloes predict (fast) and probe.
def _encoded(tmp_path, name, encoding, bom, sep=","):
    text = ("text" + sep + "id\n") + "".join(
        f"{t}{sep}{i}\n" for i, t in enumerate(PROBE_NEW)
    )
    if name.endswith(".jsonl"):
        text = "".join(
            json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(PROBE_NEW)
        )
    data = bom + text.encode(encoding)
    (tmp_path / name).write_bytes(data)
    return str(tmp_path / name)


ENCODINGS = [  # (id, file name, encoding, BOM bytes)
    ("csv_utf8_bom", "d.csv", "utf-8", b"\xef\xbb\xbf"),
    ("tsv_utf8_bom", "d.tsv", "utf-8", b"\xef\xbb\xbf"),
    ("jsonl_utf8_bom", "d.jsonl", "utf-8", b"\xef\xbb\xbf"),
    ("csv_utf16_le", "d.csv", "utf-16-le", b"\xff\xfe"),
    ("tsv_utf16_be", "d.tsv", "utf-16-be", b"\xfe\xff"),
    ("jsonl_utf16", "d.jsonl", "utf-16-le", b"\xff\xfe"),
    ("csv_utf32", "d.csv", "utf-32-le", b"\xff\xfe\x00\x00"),
    ("csv_no_bom", "d.csv", "utf-8", b""),
]


@pytest.mark.parametrize(
    "name, encoding, bom",
    [pytest.param(n, e, b, id=i) for i, n, e, b in ENCODINGS],
)
def test_skloes_predict_reads_byte_order_marks(
    saved_probes, tmp_path, capsys, name, encoding, bom
):
    probe, folder = saved_probes["logistic"]
    sep = "\t" if name.endswith(".tsv") else ","
    data = _encoded(tmp_path, name, encoding, bom, sep)
    assert main(["predict", str(folder), "--data", data]) == 0, capsys.readouterr().err
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == list(probe.predict(PROBE_NEW))


def test_a_file_that_is_not_utf8_is_one_line(saved_probes, tmp_path, capsys):
    _, folder = saved_probes["logistic"]
    (tmp_path / "d.csv").write_bytes("text\ncaf\u00e9 film\n".encode("latin-1"))
    cli_error(
        ["predict", str(folder), "--data", str(tmp_path / "d.csv")],
        r"is not UTF-8 text \(byte b'\\xe9' at offset",
        capsys,
    )


NUMERIC_TEXTS = [  # (id, texts, noted)
    ("all_numbers", ["26.0", "31", "1,000", "-4.5"] * 3, True),
    (
        "nine_in_ten_numbers",
        ["1", "2", "3", "4", "5", "6", "7", "8", "9", "a film"],
        True,
    ),
    ("half_numbers", ["1", "a film", "2", "the plot"] * 2, False),
    ("words", PROBE_NEW, False),
    ("scientific", ["1e3", "2E-2", "3.5", "-inf"], True),
]


@pytest.mark.parametrize(
    "texts, noted", [pytest.param(t, n, id=i) for i, t, n in NUMERIC_TEXTS]
)
def test_a_numeric_text_column_is_noted(saved_probes, tmp_path, capsys, texts, noted):
    _, folder = saved_probes["logistic"]
    data = _write(tmp_path / "d.csv", ["text"], [[f'"{t}"'] for t in texts])
    assert main(["predict", str(folder), "--data", data]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == len(texts) + 1
    assert ("holds numbers in" in captured.err) is noted, captured.err


# skloes probe --task: failures come before the model is loaded (fast).
def _labelled(tmp_path, labels, name="d.csv"):
    texts = random_reviews(len(labels))
    return _write(tmp_path / name, ["text", "label"], zip(texts, labels, strict=True))


TASK_ERRORS = [  # (id, labels, --task, needle)
    (
        "continuous_as_classes",
        [0.5, 1.25, 2.5, 3.75] * 5,
        "classification",
        r"--task classification needs class labels.*e\.g\. 0\.5",
    ),
    (
        "strings_as_regression",
        ["pos", "neg"] * 10,
        "regression",
        r"--task regression needs numbers; --label-column 'label' holds '(pos|neg)'",
    ),
    (
        "singleton_numeric_class",
        [18, 19, 20, 21, 22] * 2 + [23],
        "auto",
        r"class 23 has 1 sample.*pass --task regression",
    ),
    (
        "singleton_string_class",
        ["a", "b"] * 5 + ["c"],
        "auto",
        r"class 'c' has 1 sample(?!.*--task)",
    ),
    ("constant_target", [2.5] * 12, "regression", r"single value \(2\.5\)"),
    ("too_few_rows", [1.5, 2.5, 3.5] * 3, "regression", r"only 9 labelled rows"),
    ("infinite_target", [1.5, 2.5, "inf"] * 4, "regression", r"'label' holds infinity"),
    ("infinite_target_auto", [1.5, 2.5, "-inf"] * 4, "auto", r"'label' holds infinity"),
]


@pytest.mark.parametrize(
    "labels, task, needle",
    [pytest.param(lab, t, n, id=i) for i, lab, t, n in TASK_ERRORS],
)
def test_skloes_probe_task_errors(
    tiny_model_path, tmp_path, capsys, labels, task, needle
):
    data = _labelled(tmp_path, labels)
    argv = ["probe", "--model", tiny_model_path, "--data", data, "--task", task]
    cli_error([*argv, "--out", str(tmp_path / "out")], needle, capsys)
    assert not (tmp_path / "out").exists()


def test_skloes_probe_task_regression_on_builtin_data_is_refused(tmp_path, capsys):
    cli_error(
        ["probe", "--task", "regression", "--out", str(tmp_path / "o")],
        r"built-in data set 'rotten_tomatoes' has classes",
        capsys,
    )


def test_skloes_probe_task_choices(tmp_path, capsys):
    cli_error(["probe", "--task", "ranking"], r"--task.*invalid choice", capsys)


@pytest.mark.parametrize(
    "labels, task, expected",
    [
        pytest.param(
            [float(v) for v in range(18, 58)],
            "auto",
            "regression",
            id="float_ages_auto",
        ),
        pytest.param(
            list(range(18, 58)), "regression", "regression", id="int_ages_regression"
        ),
        pytest.param(
            [0.0, 1.0] * 20, "auto", "classification", id="float_zero_one_auto"
        ),
    ],
)
def test_skloes_probe_task_is_read_and_saved(
    tiny_model_path, tmp_path, capsys, labels, task, expected
):
    from skloes.cli._data import load_data

    data = _labelled(tmp_path, labels)
    _, y, _, found, _ = load_data(data, "text", "label", None, 0, task=task)
    assert found == expected
    if expected == "regression":
        assert y.dtype == np.float64
    noted = "probed as a continuous target" in capsys.readouterr().err
    assert noted is (task == "auto" and expected == "regression")


def test_skloes_probe_regression_end_to_end(tiny_model_path, tmp_path, capsys):
    """A numeric target from a file with a byte-order mark: a regression
    report, a saved regressor, and predictions of it."""
    labels = [float(v) for v in range(18, 58)]
    texts = random_reviews(len(labels))
    body = "text,label\n" + "".join(
        f"{t},{v}\n" for t, v in zip(texts, labels, strict=True)
    )
    (tmp_path / "ages.csv").write_bytes(b"\xef\xbb\xbf" + body.encode())
    argv = [
        "probe", "--model", tiny_model_path, "--data", str(tmp_path / "ages.csv"),
        "--n-layers-to-select", "1", "--device", "cpu", "--max-samples", "all",
        "--out", str(tmp_path / "out"), "--save", str(tmp_path / "out" / "probe"),
    ]  # fmt: skip
    status = main(argv)
    assert status == 0, capsys.readouterr().err
    capsys.readouterr()
    report = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert report["task"] == "regression" and report["scoring"] == "r2"
    probe = load_probe(tmp_path / "out" / "probe")
    assert isinstance(probe, LayerProbeRegressor)
    new = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    assert main(["predict", str(tmp_path / "out" / "probe"), "--data", new]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0] == "prediction"
    np.testing.assert_allclose(
        np.array(rows[1:], float), probe.predict(PROBE_NEW), rtol=1e-5
    )


# ==========================================================================
# New in issue 34: a former option with its new name, skloes predict's options
# ==========================================================================
@pytest.mark.parametrize(
    "argv, needle",
    [
        pytest.param(
            ["--k", "2", "--n-layers-to-select", "3"],
            r"set --n-layers-to-select only; --k is its former name \(got --k 2 "
            r"and --n-layers-to-select 3\)",
            id="k_and_a_new_budget",
        ),
        pytest.param(
            ["--k", "2", "--n-layers-to-select", "auto"],
            r"set --n-layers-to-select only; --k is its former name",
            id="k_and_auto",
        ),
    ],
)
def test_skloes_probe_former_option_with_its_new_name(
    tiny_model_path, tmp_path, capsys, argv, needle
):
    """``--k 2 --n-layers-to-select 3`` selected 2 layers without a word; the
    Python API refuses a former name with its new one, and so does the CLI."""
    cli_error(
        ["probe", "--model", tiny_model_path, *argv, "--out", str(tmp_path / "o")],
        needle,
        capsys,
    )
    assert not (tmp_path / "o").exists()


def test_skloes_probe_former_option_alone_warns_and_is_used():
    from skloes.cli._args import build_parser
    from skloes.cli._main import _honour_renamed_options

    args = build_parser().parse_args(["probe", "--k", "2", "--n-layers-to-select", "4"])
    with pytest.warns(FutureWarning, match=r"`--k` was renamed `--n-layers-to-select`"):
        _honour_renamed_options(args)
    assert args.n_layers_to_select == 2


@pytest.fixture(scope="module")
def exported_probe(tiny_model_path, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from skloes.probe import LayerProbeClassifier, save_probe
    from skloes.selection import LastKSelector

    texts = random_reviews(16)
    probe = LayerProbeClassifier(
        tiny_model_path, device="cpu", selector=LastKSelector(n_layers_to_select=1)
    ).fit(texts, ["pos", "neg"] * 8)
    folder = tmp_path_factory.mktemp("exported") / "p"
    return probe, save_probe(probe, folder, export="onnx", check_texts=texts)


PREDICT_CASES = [  # (id, which folder, options, needle or None for a result)
    ("exported_with_device", "exported", ["--device", "cpu"], r"--device applies"),
    ("threads_zero", "exported", ["--threads", "0"], r"--threads"),
    ("batch_size_word", "exported", ["--batch-size", "many"], r"--batch-size"),
    ("runtime_unknown", "exported", ["--runtime", "tensorrt"], r"--runtime"),
    (
        "onnx_without_an_export",
        "plain",
        ["--runtime", "onnx"],
        r"holds no exported graph",
    ),
    ("out_a_folder", "exported", ["--out", "{tmp}"], r"--out .* is a folder"),
    ("out_exists", "exported", ["--out", "{tmp}/new.csv"], r"exists; pass --force"),
    (
        "out_in_a_missing_folder",
        "exported",
        ["--out", "{tmp}/nowhere/p.csv"],
        r"does not exist",
    ),
    ("text_column_missing", "exported", ["--text-column", "body"], r"--text-column"),
    ("exported_torch_runtime", "exported", ["--runtime", "torch"], None),
    ("exported_batch_size_one", "exported", ["--batch-size", "1"], None),
]


@pytest.mark.parametrize(
    "which, options, needle",
    [pytest.param(w, o, n, id=i) for i, w, o, n in PREDICT_CASES],
)
def test_skloes_predict_options(
    exported_probe, saved_probes, tmp_path, capsys, which, options, needle
):
    probe, folder = exported_probe if which == "exported" else saved_probes["logistic"]
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    options = [o.replace("{tmp}", str(tmp_path)) for o in options]
    argv = ["predict", str(folder), "--data", data, *options]
    if needle is not None:
        cli_error(argv, needle, capsys)
        return
    assert main(argv) == 0, capsys.readouterr().err
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0] == "prediction,proba_neg,proba_pos"
    assert [r.split(",")[0] for r in rows[1:]] == probe.predict(PROBE_NEW).tolist()


# --------------------------------------------------------------------------
# New in issue 55: --out with a report name that is a link or a special
# file is refused before any work, --force or not; nothing outside changes.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
@pytest.mark.parametrize("name", ["report.html", "layers.csv", "selection.json"])
def test_skloes_probe_out_never_writes_through_a_link(
    tmp_path, capsys, monkeypatch, name, kind, force
):
    import skloes.cli._probe

    def boom(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(skloes.cli._probe, "load_data", boom)
    out, outside = tmp_path / "out", tmp_path / "outside.html"
    out.mkdir()
    outside.write_text("outside")
    if kind == "link":
        (out / name).symlink_to(outside)
    elif kind == "dangling":
        (out / name).symlink_to(tmp_path / "nowhere")
    else:
        os.mkfifo(out / name)
    cli_error(
        ["probe", "--out", str(out), *force],
        rf"--out .* holds {re.escape(name)}, which is a .*never through a link",
        capsys,
    )
    assert outside.read_text() == "outside" and not (tmp_path / "nowhere").exists()
    assert [p.name for p in out.iterdir()] == [name]


def _out_kind(tmp_path, name, kind):
    out, outside = tmp_path / name, tmp_path / "outside.txt"
    outside.write_text("outside")
    if kind == "link":
        out.symlink_to(outside)
    elif kind == "dangling":
        out.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "folder":
        out.mkdir()
    return out, outside


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("kind", ["link", "dangling", "fifo", "folder"])
@pytest.mark.parametrize("name", ["p.csv", "p.parquet"])
def test_skloes_predict_out_never_writes_through_a_link_or_into_a_folder(
    exported_probe, tmp_path, capsys, name, kind, force
):
    _, folder = exported_probe
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    out, outside = _out_kind(tmp_path, name, kind)
    needle = {
        "folder": r"--out .* is a folder; give a file name",
        "fifo": r"--out .* is a named pipe, not a regular file; skloes writes only",
    }.get(kind, r"--out .* is a symbolic link \(to .*\); skloes writes only")
    cli_error(
        ["predict", str(folder), "--data", data, "--out", str(out), *force],
        needle,
        capsys,
    )
    assert outside.read_text() == "outside" and not (tmp_path / "nowhere").exists()


def test_skloes_predict_out_is_written_whole(exported_probe, tmp_path, capsys):
    """--force replaces a file of the user's whole: no hidden file is left."""
    probe, folder = exported_probe
    data = _write(tmp_path / "new.csv", ["text"], [[t] for t in PROBE_NEW])
    out = tmp_path / "p.csv"
    out.write_text("old")
    argv = ["predict", str(folder), "--data", data, "--out", str(out), "--force"]
    assert main(argv) == 0, capsys.readouterr().err
    rows = out.read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == probe.predict(PROBE_NEW).tolist()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
