"""scripts/ledger_value.py: a path target sizes each continued-SFT control by its RL comparison's ledger."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ledger_value.py"
spec = importlib.util.spec_from_file_location("ledger_value", SCRIPT)
ledger_value = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ledger_value)


def write_results(folder: Path) -> Path:
    folder.mkdir()
    res = {"arms": [{"name": "preset"}, {"name": "kl_coef=0.05"}],
           "ledger": {"preset": {"wall time (s)": 611.4, "teacher forward tokens": None},
                      "kl_coef=0.05": {"wall time (s)": 702.6, "teacher forward tokens": None}}}
    (folder / "results.json").write_text(json.dumps(res))
    return folder


def test_prints_the_first_arms_column_or_a_named_arms(tmp_path, capsys):
    folder = write_results(tmp_path / "search-r1")
    assert ledger_value.main([str(folder), "wall time (s)"]) == 0
    assert capsys.readouterr().out == "611\n"
    assert ledger_value.ledger_value(folder, "wall time (s)", "kl_coef=0.05") == 702.6


def test_says_what_is_missing(tmp_path, capsys):
    with pytest.raises(ValueError, match="no such file; run the comparison first"):
        ledger_value.ledger_value(tmp_path / "none", "wall time (s)")
    folder = write_results(tmp_path / "search-r1")
    with pytest.raises(ValueError, match="arm 'x': not in .*its arms are preset, kl_coef=0.05"):
        ledger_value.ledger_value(folder, "wall time (s)", "x")
    assert ledger_value.main([str(folder), "teacher forward tokens"]) == 1
    err = capsys.readouterr().err
    assert "not logged by preset" in err and "its logged columns are wall time (s)" in err
