"""One GRPO step through `arl serve` (the real `tinker` SDK over HTTP, `backend=tinker`) against the same
step in-process (the local engine): the overhead of HTTP and serialisation, as a ratio.

Both contenders are LoRA clients of the same base model with the same rank and seed, take the same 8
prompts of the mini task through the chat template, sample a group of 8 at temperature 1 with at most 40
new tokens under the same seeds, and run the recipe's step (`save_weights_and_get_sampling_client` +
`sample` + reward + advantage + `forward_backward(importance_sampling)` + `optim_step`,
`bench_grpo_trl.our_step`) on every completion: the base model earns no reward, so the recipe would train
none, and a step without training would hide half the traffic. The remote client is arl.backend.tinker
(what a run with backend=tinker uses); the server is `arl serve` in a subprocess on this machine with the
same torch threads, and it sits idle while the in-process step runs (and the other way round).

    python benchmarks/bench_serve.py [--steps 5] [--threads 2] [--model arl/tiny-qwen3-2m]

The contenders take turns step by step after a warm-up step each (the machine is a shared VM whose
speed drifts); the ratio is median time against median time. `other_cores_busy` as in bench_engine.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import arl
from arl import settings
from arl.backend import tinker as remote
from arl.coldstart import encode_chat
from arl.data import format_prompt
from arl.recipes import grpo
from bench_engine import cpu_busy_snapshot, other_cores_busy
from bench_grpo_trl import our_step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serve_util import serving  # noqa: E402 - the tests' way of starting `arl serve`


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps per contender (after one warm-up step)")
    ap.add_argument("--threads", type=int, default=settings.get().num_threads)
    ap.add_argument("--model", default="arl/tiny-qwen3-2m", help="the model of the mini chapters")
    ap.add_argument("--lora-rank", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--out", default="benchmarks/results/serve-vs-inprocess.json")
    args = ap.parse_args()
    arl.configure(num_threads=args.threads)
    train, _ = grpo.Config().load_task()
    problems = train[: args.prompts]
    answers = [p.answer for p in problems]
    env = {**os.environ, "ARL_NUM_THREADS": str(args.threads), "ARL_HOME": str(settings.get().home)}
    with tempfile.TemporaryDirectory() as home, serving(Path(home) / "serve", env=env) as url:
        os.environ.setdefault("TINKER_API_KEY", "tml-local")
        clients = {"in-process": arl.ServiceClient(run_name="bench-serve"),
                   "arl serve": remote.ServiceClient(url, display_name="bench-serve")}
        clients = {name: svc.create_lora_training_client(args.model, rank=args.lora_rank, seed=0)
                   for name, svc in clients.items()}
        tok = clients["in-process"].get_tokenizer()
        prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
        start = cpu_busy_snapshot()
        results = {name: [] for name in clients}
        for i in range(args.steps + 1):  # step 0 warms up
            for name, client in clients.items():
                step = our_step(client, tok, prompts, answers, args, i + 1, send_all=True)
                if i:
                    results[name].append(step)
    t = {name: statistics.median(r["time"] for r in rs) for name, rs in results.items()}
    result = {
        "model": args.model, "lora_rank": args.lora_rank, "threads": args.threads,
        "batch": f"{args.prompts} prompts x {args.group_size} samples, <= {args.max_tokens} new tokens, all trained",
        "in_process_step_s": round(t["in-process"], 3),
        "serve_step_s": round(t["arl serve"], 3),
        "ratio (serve / in-process)": round(t["arl serve"] / t["in-process"], 2),
        "in_process_sample_s": round(statistics.median(r["sample"] for r in results["in-process"]), 3),
        "serve_sample_s": round(statistics.median(r["sample"] for r in results["arl serve"]), 3),
        "new_tokens_per_step": [statistics.median(r["new_tokens"] for r in rs) for rs in results.values()],
        "other_cores_busy": round(other_cores_busy(start), 2),
    }
    for key, value in result.items():
        print(f"{key:32} {value}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
