"""``skloes extract`` and ``skloes predict`` at scale, from the shell."""

from __future__ import annotations

import numpy as np

from skloes.cli import main
from skloes.scale import LayerStore


def _csv(texts, path):
    import pandas as pd

    pd.DataFrame(
        {
            "body": texts,
            "id": [f"t{i}" for i in range(len(texts))],
            "lab": np.arange(len(texts)) % 2,
        }
    ).to_csv(path, index=False)
    return path


def _error(capsys, status, command, needle):
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"skloes {command}: error:") and needle in err[0]


def test_extract_writes_a_store_and_resumes(tiny_model_path, texts, tmp_path, capsys):
    data = _csv(texts, tmp_path / "t.csv")
    argv = [
        "extract",
        "--model",
        tiny_model_path,
        "--data",
        str(data),
        "--store",
        str(tmp_path / "s"),
        "--layers",
        "0,2",
        "--text-column",
        "body",
        "--id-column",
        "id",
        "--columns",
        "lab",
        "--max-length",
        "16",
        "--shard-size",
        "50",
        "--device",
        "cpu",
    ]
    assert main(argv) == 0
    assert "230 rows, layers [0, 2]" in capsys.readouterr().err
    store = LayerStore(tmp_path / "s").verify()
    assert store.columns == ["id", "lab"] and store.n_shards == 5
    assert store.settings["max_length"] == 16
    assert main(argv) == 0  # resumed: the store is complete, nothing to do
    capsys.readouterr()
    status = main([*argv, "--layers", "1"])  # the last --layers wins
    _error(capsys, status, "extract", "was written with layers=[0, 2]")
    status = main(
        [
            "extract",
            "--data",
            str(data),
            "--store",
            str(tmp_path / "x"),
            "--layers",
            "2,z",
        ]
    )
    _error(capsys, status, "extract", "--layers must be 'all', a list like 6,14,22")


def test_predict_at_scale_from_the_shell(tiny_model_path, texts, tmp_path, capsys):
    import pandas as pd

    from skloes.probe import LayerProbeClassifier, save_probe

    probe = LayerProbeClassifier(tiny_model_path, device="cpu")
    probe.fit(texts[:60], np.arange(60) % 2)
    save_probe(probe, tmp_path / "probe")
    data = _csv(texts, tmp_path / "t.csv")
    out = tmp_path / "preds.parquet"
    argv = [
        "predict",
        str(tmp_path / "probe"),
        "--data",
        str(data),
        "--out",
        str(out),
        "--text-column",
        "body",
        "--id-column",
        "id",
    ]
    assert main(argv) == 0
    frame = pd.read_parquet(out)
    assert frame.id.tolist() == [f"t{i}" for i in range(230)]
    assert frame.prediction.tolist() == probe.predict(texts).tolist()
    capsys.readouterr()
    _error(capsys, main(argv), "predict", "exists; pass --force to overwrite it")
    status = main([*argv[:5], str(tmp_path / "p.csv"), "--engine", "local"])
    _error(capsys, status, "predict", "--engine writes a .parquet file")
    status = main([*argv[:5], str(tmp_path / "p.csv"), "--id-column", "id"])
    _error(capsys, status, "predict", "--id-column needs a .parquet --out")


def test_the_scaling_guide_commands_are_the_cli_options():
    import re
    import shlex
    from pathlib import Path

    from skloes.cli._args import build_parser

    guide = Path(__file__).resolve().parents[2] / "doc" / "user_guide" / "scaling.rst"
    blocks = re.findall(
        r"\.\. code-block:: bash\n\n((?:   .*\n)+)", guide.read_text(encoding="utf-8")
    )
    (block,) = [b for b in blocks if "skloes extract" in b]
    for line in block.strip().splitlines():
        words = shlex.split(line)
        assert words[0] == "skloes"
        args = build_parser().parse_args(words[1:] + ["--address", "auto"])
        assert args.engine in ("ray", "dask") and args.address == "auto"
