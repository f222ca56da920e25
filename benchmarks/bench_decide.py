"""Decisions per second of the Jev chapter's reader: one forward pass per record, no generation.

Each record of the mini task's test split (a ticket or a claim, three questions) is read with
`arl.decide.read_logprobs`: `sample(max_tokens=1, topk_prompt_logprobs=K)` over prompt + skeleton,
the top-K list at each marker, the candidates' logprobs. Three ways: every record submitted at once
(the engine batches the prefills), one record at a time (latency), and with K = the whole vocabulary
(what exact candidate logprobs cost through this API). For scale, the same prompts through
`compute_logprobs` (the same forward pass, one logprob per position, no top-K lists). Weights do not
change the speed, so the base model is read.

    python benchmarks/bench_decide.py [--model arl/tiny-qwen3-0.5m] [--threads 1] [--records 200]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import arl
from arl import settings
from arl.data.decisions import make_splits
from arl.decide import DecisionFormat, encode_record, read_logprobs
from bench_engine import cpu_busy_snapshot, other_cores_busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="arl/tiny-qwen3-0.5m", help="the Jev mini preset's model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--records", type=int, default=200, help="test-split records (3 questions each)")
    ap.add_argument("--topk", type=int, default=64, help="the chapter's default K")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="JSON file (default: benchmarks/results/decide-<model>.json)")
    args = ap.parse_args()
    settings.configure(num_threads=args.threads)
    start = cpu_busy_snapshot()

    records = make_splits(n_test=args.records)["test"]
    client = arl.ServiceClient(run_name="bench-decide").create_full_training_client(args.model, seed=0)
    tok = client.get_tokenizer()
    sampler = client.save_weights_and_get_sampling_client()
    fmt = DecisionFormat.for_tokenizer(tok)
    n_questions = sum(len(r.questions) for r in records)
    n_tokens = sum(len(encode_record(tok, fmt, r)[0]) for r in records)

    def best(fn) -> float:
        fn()  # warm-up
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_batched = best(lambda: read_logprobs(sampler, tok, fmt, records, args.topk))
    few = records[:20]
    t_single = best(lambda: [read_logprobs(sampler, tok, fmt, [r], args.topk) for r in few]) / len(few)
    t_vocab = best(lambda: read_logprobs(sampler, tok, fmt, few, 0)) / len(few)
    prompts = [arl.ModelInput.from_ints(encode_record(tok, fmt, r)[0]) for r in records]
    t_forward = best(lambda: [f.result() for f in [sampler.compute_logprobs(p) for p in prompts]])
    q_per_record = n_questions / len(records)
    result = {
        "model": args.model, "threads": args.threads, "records": len(records), "questions": n_questions,
        "mean_tokens_per_record": round(n_tokens / len(records), 1), "topk": args.topk,
        "batched_decisions_per_s": round(n_questions / t_batched, 1),
        "batched_records_per_s": round(len(records) / t_batched, 1),
        "one_at_a_time_ms_per_record": round(1000 * t_single, 1),
        "one_at_a_time_decisions_per_s": round(q_per_record / t_single, 1),
        "whole_vocab_topk_decisions_per_s": round(q_per_record / t_vocab, 1),
        "forward_only_records_per_s": round(len(records) / t_forward, 1),
        "other_cores_busy": round(other_cores_busy(start), 2),
    }
    for key, value in result.items():
        print(f"{key:34} {value}")
    out = Path(args.out or f"benchmarks/results/decide-{args.model.split('/')[-1]}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
