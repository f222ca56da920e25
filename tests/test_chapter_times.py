"""scripts/chapter_times.py: which runs count as a chapter's mini runs, their wall time, and the table it
writes into Getting Started (the smoke measurement itself is not run here: minutes of every chapter)."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chapter_times.py"
spec = importlib.util.spec_from_file_location("chapter_times", SCRIPT)
chapter_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chapter_times)


def fake_run(folder: Path, chapter: str, config: dict, step_times=(), finished=True) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"chapter": chapter}))
    (folder / "config.json").write_text(json.dumps(config))
    rows = [{"step": i, "time/step": t, "train/datums": 8.0} for i, t in enumerate(step_times)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if finished:
        (folder / "eval").mkdir()
        (folder / "eval" / "summary.json").write_text("{}")
    return folder


@pytest.fixture(scope="module")
def grpo_mini():
    return chapter_times.mini_config("grpo")


def test_mini_runs_are_the_finished_runs_of_the_mini_preset(tmp_path, grpo_mini):
    runs = tmp_path / "runs"
    fake_run(runs / "grpo" / "a", "grpo", grpo_mini, [1.0, 2.0, 3.0])
    # an arm of a comparison, another seed: still the mini preset
    fake_run(runs / "compare" / "grpo-x" / "runs" / "grpo" / "seed1", "grpo", {**grpo_mini, "seed": 1}, [5.0, 5.0])
    fake_run(runs / "grpo" / "changed", "grpo", {**grpo_mini, "learning_rate": 1.0}, [100.0])
    fake_run(runs / "grpo" / "killed", "grpo", grpo_mini, [100.0], finished=False)
    fake_run(runs / "sft" / "other", "sft", grpo_mini, [100.0])
    assert sorted(chapter_times.mini_times(runs, "grpo", grpo_mini)) == [6.0, 10.0]
    assert chapter_times.mini_cell([6.0, 10.0, 400.0]) == "10 s (3 runs)"
    assert chapter_times.mini_cell([150.0]) == "2.5 min (1 run)"
    assert chapter_times.mini_cell([]) is None
    assert chapter_times.mini_times(tmp_path / "absent", "grpo", grpo_mini) == []


def test_a_run_without_step_times_is_timed_by_its_folder(tmp_path):
    run = fake_run(tmp_path / "losses" / "mini", "losses", {"seed": 0})
    start = 1_700_000_000
    os.utime(run / "config.json", (start, start))
    os.utime(run / "eval" / "summary.json", (start + 75, start + 75))
    assert chapter_times.run_wall_time(run) == pytest.approx(75.0)


DOC = f"""# Getting Started

Intro kept.

{chapter_times.BEGIN}
{chapter_times.END}

After kept.
"""


def table_rows(text: str) -> dict[str, list[str]]:
    return {cells[0].strip("`"): cells for cells in
            ([c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("| `"))}


def test_rewrite_fills_every_chapter_and_keeps_what_it_did_not_measure(tmp_path):
    doc = tmp_path / "getting-started.md"
    doc.write_text(DOC)
    chapter_times.rewrite(doc, {"grpo": "12 s", "retool": None}, {"grpo": "3.2 min (3 runs)"}, cores=2)
    text = doc.read_text()
    assert text.startswith("# Getting Started\n\nIntro kept.\n\n") and text.endswith("\n\nAfter kept.\n")
    rows = table_rows(text)
    assert list(rows) == list(chapter_times.CHAPTERS)
    assert rows["grpo"][3:] == ["12 s", "3.2 min (3 runs)"]
    assert rows["retool"][2:] == ["Linux (the sandbox)", "not measured yet", "not measured yet"]
    assert rows["textworld"][2] == "`textworld` extra (Linux, macOS)" and rows["losses"][2] == "nothing"
    assert "2 cores" in text

    # a second pass that measures only dapo keeps grpo's values, and an empty mini value keeps the old one
    chapter_times.rewrite(doc, {"dapo": "9 s"}, {"grpo": None}, cores=2)
    rows = table_rows(doc.read_text())
    assert rows["grpo"][3:] == ["12 s", "3.2 min (3 runs)"] and rows["dapo"][3] == "9 s"
    assert doc.read_text().count(chapter_times.BEGIN) == 1
    assert not [p for p in tmp_path.iterdir() if p.name != doc.name], "the rewrite left a temporary file"


def test_rewrite_without_markers_names_them(tmp_path):
    doc = tmp_path / "getting-started.md"
    doc.write_text("# Getting Started\n")
    with pytest.raises(ValueError, match="chapter-times:begin"):
        chapter_times.rewrite(doc, {}, {}, cores=2)
    assert doc.read_text() == "# Getting Started\n"
