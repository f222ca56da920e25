"""Engine speed, in one process, on one tiny model and one batch.

Sampling: our SamplingClient (one prefill per prompt shared by its samples, all requests decoded as
one batch) against `transformers` `model.generate` on the same prompts, the same number of samples
and exactly the same number of new tokens. Training: forward+backward tokens/s of a full fine-tune
`forward_backward`. Both are also given as a fraction of this machine's measured float32 matmul
FLOP/s (model FLOPs: 2N per sampled token, 6N per trained token, N = non-embedding parameters plus
the output projection).

    python benchmarks/bench_engine.py [--model arl/tiny-qwen3-2m] [--threads 2] [--repeats 3]

The default batch is one GRPO step of the mini chapters: 8 word-problem prompts through the chat
template, a group of 8 samples each, 64 new tokens per sample.

`other_cores_busy` reports how many cores other processes used while it ran (from /proc/stat): on
2 cores any other busy process distorts the numbers, so read them only when it is near 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

import torch

import arl
from arl import models, settings
from arl.backend.local.engine import ENGINE


def cpu_busy_snapshot():
    """(total jiffies busy on the machine, our own process's jiffies) for other_cores_busy."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]
    with open("/proc/self/stat") as f:
        own = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:15])
    return busy, own, time.monotonic()


def other_cores_busy(start) -> float:
    b0, o0, t0 = start
    b1, o1, t1 = cpu_busy_snapshot()
    hz = os.sysconf("SC_CLK_TCK")
    return max(((b1 - b0) - (o1 - o0)) / hz / (t1 - t0), 0.0)


def timed_rounds(fns, repeats: int) -> list[list[float]]:
    """Wall times of each function over `repeats` rounds, the functions taking turns within a round,
    so that a machine whose speed drifts (a shared VM) slows every contender of a round alike."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return times


def best_of(fn, repeats: int) -> float:
    return min(timed_rounds([fn], repeats)[0])


def word_problem_prompts(tok, n: int) -> list[list[int]]:
    """`n` GRPO-shaped prompts: word problems through the chat template (about 53 tokens each)."""
    questions = [f"Sam has {11 * i + 3} apples. He buys {7 * i + 5} more and gives {i + 2} to Ana. "
                 f"How many apples does Sam have now? Reason step by step and put the answer in \\boxed{{}}."
                 for i in range(n)]
    return [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True,
                                    return_dict=False) for q in questions]


def matmul_flops(threads: int, n: int = 1024, repeats: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    t = best_of(lambda: [a @ b for _ in range(repeats)], 3)
    return 2 * n**3 * repeats / t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="arl/tiny-qwen3-2m", help="the model of the mini chapters and `arl demo`")
    ap.add_argument("--threads", type=int, default=settings.get().num_threads)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8, help="group size (samples per prompt)")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--train-batch", type=int, default=32)
    ap.add_argument("--train-len", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="JSON file for the results (default: benchmarks/results/engine-<model>.json)")
    args = ap.parse_args()
    arl.configure(num_threads=args.threads)
    start = cpu_busy_snapshot()

    loaded = ENGINE.call(models.load_model, args.model)
    tok = loaded.tokenizer
    lm = loaded.model.eval()
    n_embed = lm.get_input_embeddings().weight.numel()
    n_params = sum(p.numel() for p in lm.parameters())
    flop_params = n_params - n_embed + lm.get_output_embeddings().weight.numel()
    prompts = word_problem_prompts(tok, args.prompts)
    n_new = args.prompts * args.samples * args.new_tokens

    sampler = arl.ServiceClient().create_sampling_client(base_model=args.model)
    params = arl.SamplingParams(max_tokens=args.new_tokens, stop=[], seed=0)

    def ours():
        async def run():
            return await asyncio.gather(*[sampler.sample_async(arl.ModelInput.from_ints(p), args.samples, params)
                                          for p in prompts])
        res = asyncio.run(run())
        assert sum(len(s.tokens) for r in res for s in r.sequences) == n_new

    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def hf_generate():
        with torch.no_grad():
            return lm.generate(input_ids=ids, attention_mask=mask, do_sample=True, num_return_sequences=args.samples,
                              max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, use_cache=True,
                              pad_token_id=pad, temperature=1.0, top_k=0, top_p=1.0)

    def hf():
        # on the engine thread too, so both contenders run their kernels from the same thread
        # (see arl/backend/local/engine.py for why the thread matters)
        out = ENGINE.call(hf_generate)
        assert out.shape == (args.prompts * args.samples, width + args.new_tokens)

    rounds_ours, rounds_hf = timed_rounds([ours, hf], args.repeats)
    t_ours, t_hf = min(rounds_ours), min(rounds_hf)
    ratios = sorted(h / o for o, h in zip(rounds_ours, rounds_hf))

    trainer = arl.ServiceClient().create_full_training_client(args.model, seed=0)
    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(0, len(tok), (args.train_batch, args.train_len + 1), generator=g).tolist()
    data = [arl.Datum(model_input=arl.ModelInput.from_ints(s[:-1]), loss_fn_inputs={"target_tokens": s[1:]})
            for s in seqs]
    t_train = best_of(lambda: trainer.forward_backward(data, "cross_entropy").result(), args.repeats)
    n_train = args.train_batch * args.train_len

    peak = ENGINE.call(matmul_flops, args.threads)
    sample_tps, hf_tps, train_tps = n_new / t_ours, n_new / t_hf, n_train / t_train
    result = {
        "model": args.model, "params": n_params, "flop_params": flop_params, "threads": args.threads,
        "batch": f"{args.prompts} prompts x {args.samples} samples x {args.new_tokens} new tokens",
        "sample_tokens_per_s": round(sample_tps, 1), "hf_generate_tokens_per_s": round(hf_tps, 1),
        "sample_speedup_vs_hf": round(sample_tps / hf_tps, 2),
        "speedup_per_round": f"median {statistics.median(ratios):.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f}",
        "train_batch": f"{args.train_batch} x {args.train_len} tokens",
        "fwd_bwd_tokens_per_s": round(train_tps, 1),
        "matmul_gflops": round(peak / 1e9, 2),
        "sample_fraction_of_matmul": round(sample_tps * 2 * flop_params / peak, 4),
        "fwd_bwd_fraction_of_matmul": round(train_tps * 6 * flop_params / peak, 4),
        "other_cores_busy": round(other_cores_busy(start), 2),
    }
    for key, value in result.items():
        print(f"{key:28} {value}")
    out = Path(args.out or f"benchmarks/results/engine-{args.model.split('/')[-1]}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
