"""Agent rollouts: episodes per second of a chapter's training rollouts (`arl.rollout.rollout_groups`) on
its mini preset, from its cached cold start, and where the time goes (the sampler, the environments).

    python benchmarks/bench_rollouts.py textworld [--steps 6] [--threads 1]
    python benchmarks/bench_rollouts.py retool --steps 6
    python benchmarks/bench_rollouts.py textworld --src /path/to/other/checkout/src   # the same on another checkout

Each step is one training step's rollouts: `batch_prompts` games (problems) of the training split in the
recipe's order, `group_size` episodes each, at the recipe's temperature and seeds, from the start weights
(no update between steps, so every checkout plays the same policy). A warm-up step first; then the median
of the steps' episodes/s. `env_s` is the wall time spent inside environment steps summed over threads
(overlapping with decoding or not), `turns` the assistant turns played, `sampled` the tokens sampled.
Compare two checkouts in one invocation each, alternating, on a quiet machine (`other_cores_busy` near 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def make_task(chapter: str, recipe, cfg):
    """The chapter's task as its `main` builds it."""
    if chapter == "retool":
        from arl.rl.retool import retool_task
        from arl.tools.sandbox import Sandbox
        return retool_task(cfg, Sandbox(cfg.sandbox_config()))
    if chapter == "search-r1":
        from arl.rl.search import search_task
        return search_task(cfg)
    return recipe.make_task(cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapter", choices=["textworld", "retool", "search-r1"])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--src", default=None, help="import arl from this src folder (another checkout) instead")
    ap.add_argument("--json", default=None, help="append the result as one JSON line to this file")
    args = ap.parse_args()
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import importlib

    from arl import config
    from arl.rl import batch
    from arl.rl.session import service
    from arl.rollout import request_seed, rollout_groups
    from arl.track import RunDir
    from bench_engine import cpu_busy_snapshot, other_cores_busy

    recipe = importlib.import_module(f"arl.recipes.{args.chapter.replace('-', '_')}")
    cfg = config.resolve(recipe.Config, recipe.PRESETS, "mini", [f"threads={args.threads}"])
    task = make_task(args.chapter, recipe, cfg)
    with tempfile.TemporaryDirectory() as out:
        run = RunDir.create(Path(out), args.chapter, "bench", {})
        svc = service(cfg, run)
        start = task.start_weights()
        client = svc.create_training_client_from_state(start) if start else svc.create_lora_training_client(cfg.model, rank=cfg.lora_rank)
        chat = task.chat(client.get_tokenizer())
        sampler = client.save_weights_and_get_sampling_client()
        env_s = [0.0]

        def timed(env):
            step = env.step

            def wrapped(message):
                t = time.perf_counter()
                try:
                    return step(message)
                finally:
                    env_s[0] += time.perf_counter() - t
            env.step = wrapped
            return env

        rows = []
        snap = cpu_busy_snapshot()
        for step in range(args.steps + 1):
            items = batch.step_items(task.train, step, cfg.batch_prompts)
            groups = [[timed(e) for e in g] for g in task.envs(items, cfg.group_size)]
            env_s[0] = 0.0
            t0 = time.perf_counter()
            done = rollout_groups(sampler, groups, chat, task.budgets, cfg.temperature, request_seed(cfg.seed, step))
            wall = time.perf_counter() - t0
            episodes = [t for g in done for t in g]
            row = {"step": step, "wall_s": wall, "episodes": len(episodes), "episodes_per_s": len(episodes) / wall,
                   "turns": sum(len(t.turns) for t in episodes), "env_s": env_s[0],
                   "sampled": sum(m for t in episodes for m in t.mask)}
            if step:
                rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    result = {"chapter": args.chapter, "src": args.src or "installed", "threads": args.threads,
              "episodes_per_s": statistics.median(r["episodes_per_s"] for r in rows),
              "wall_s": statistics.median(r["wall_s"] for r in rows),
              "env_share": sum(r["env_s"] for r in rows) / sum(r["wall_s"] for r in rows),
              "turns_per_step": statistics.mean(r["turns"] for r in rows),
              "other_cores_busy": other_cores_busy(snap)}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
