"""scripts/dapo_mechanisms.py: the DAPO note's table of what each switch acted on, early and late."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dapo_mechanisms.py"
spec = importlib.util.spec_from_file_location("dapo_mechanisms", SCRIPT)
dapo_mechanisms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dapo_mechanisms)


def test_table_averages_the_first_and_last_steps_over_seeds(tmp_path):
    folder = tmp_path / "dapo-long"
    res = {"chapter": "dapo", "arms": [{"name": "algorithm=grpo", "finished_seeds": [0, 1]}]}
    (folder).mkdir()
    (folder / "results.json").write_text(json.dumps(res))
    for seed, truncated in ((0, [0.4, 0.2, 0.0]), (1, [0.2, 0.2, 0.2])):
        run = folder / "runs" / "dapo" / f"algorithm-grpo-seed{seed}"
        run.mkdir(parents=True)
        rows = [{"step": 0, "eval/accuracy": 0.1}] + [
            {"step": i + 1, "rollout/truncated_frac": t, "rollout/entropy": 0.2 - 0.05 * i} for i, t in enumerate(truncated)]
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    arms = dapo_mechanisms.arm_runs(folder)
    assert [len(rows) for rows in arms["algorithm=grpo"]] == [3, 3]  # the eval-only row is not a training step
    table = dapo_mechanisms.table(arms, window=2).splitlines()
    # truncated: first 2 steps (0.4+0.2)/2=0.3 and 0.2 -> 25.0; last 2: 0.1 and 0.2 -> 15.0; entropy 0.175 -> 0.125
    assert table[2].startswith("| algorithm=grpo | 25.0 / 15.0 | 0.175 / 0.125 | - | - | - |")
    # any logged metric on request; a fraction is shown in %
    named = dapo_mechanisms.table(arms, 2, [dapo_mechanisms.metric_spec(k) for k in ("rollout/truncated_frac", "rollout/entropy")])
    assert named.splitlines()[0] == ("| arm | rollout/truncated_frac %, first / last 2 steps | "
                                     "rollout/entropy, first / last 2 steps |")
    assert named.splitlines()[2] == "| algorithm=grpo | 25.0 / 15.0 | 0.175 / 0.125 |"
    assert dapo_mechanisms.main([str(tmp_path / "none")]) == 1
