"""One GRPO step, ours against TRL's `GRPOTrainer`, in one process, on the same model and settings.

Both start from the same weights (the mini preset's SFT cold start of `arl/tiny-qwen3-2m`, so rewards
are mixed as in a real run), take the same 8 training prompts of the mini task through the chat
template, sample a group of 8 at temperature 1 with at most 40 new tokens, score them with the same
`boxed_reward`, use reward-minus-group-mean advantages (no std scaling, no KL term, one policy update
per batch) and take one AdamW step at the same learning rate on the whole batch of 64 completions.
What each step includes: ours, `save_weights_and_get_sampling_client` + `sample` + reward + advantage
+ `forward_backward(importance_sampling)` + `optim_step` (the recipe's step); TRL, everything between
its `on_step_begin` and `on_step_end` callbacks (generation, reward, advantage, loss, backward,
optimizer). Ours is timed twice: as the recipe runs it (completions of degenerate groups carry zero
advantage and are not sent to the trainer) and with every completion sent, as TRL does.

    python benchmarks/bench_grpo_trl.py [--steps 5] [--threads 2]

The contenders take turns step by step after a warm-up step each (the machine is a shared VM whose
speed drifts); the ratio is median time against median time. `other_cores_busy` as in
bench_engine.py: read the numbers only when it is near 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

import arl
from arl import advantages, checkpoints, models, settings
from arl.backend.local.engine import ENGINE
from arl.coldstart import encode_chat, run_cold_start
from arl.data import format_prompt
from arl.recipes import grpo
from arl.rewards import boxed_reward
from arl.rollout import rl_datum

from bench_engine import cpu_busy_snapshot, other_cores_busy


def our_step(client, tok, prompts, answers, args, seed: int, send_all: bool) -> dict:
    t0 = time.perf_counter()
    sampler = client.save_weights_and_get_sampling_client()
    params = arl.SamplingParams(max_tokens=args.max_tokens, temperature=1.0, seed=seed, stop=[tok.eos_token])
    futures = [sampler.sample(arl.ModelInput.from_ints(p), args.group_size, params) for p in prompts]
    groups = [f.result().sequences for f in futures]
    t_sample = time.perf_counter() - t0
    rewards_BG = [[boxed_reward(s.text, a) for s in seqs] for a, seqs in zip(answers, groups)]
    adv_BG, _ = advantages.batch_advantages(rewards_BG)
    kept = [(p, s, a) for p, seqs, advs in zip(prompts, groups, adv_BG) for s, a in zip(seqs, advs)
            if send_all or a != 0]
    n_tokens = sum(len(s.tokens) for _, s, _ in kept)
    datums = [rl_datum(p, s.tokens, s.logprobs, a / n_tokens) for p, s, a in kept]
    if datums:
        fb = client.forward_backward(datums, "importance_sampling")
        opt = client.optim_step(arl.AdamParams(learning_rate=args.learning_rate, grad_clip_norm=1.0))
        fb.result(), opt.result()
    return {"time": time.perf_counter() - t0, "sample": t_sample, "new_tokens": sum(len(s.tokens) for g in groups for s in g),
            "trained": len(datums)}


def make_trl_trainer(model_dir: Path, weights: dict, prompts_text, answers, args, out_dir: str):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepTimer(TrainerCallback):
        """Wall time of each optimizer step, generation included."""

        def __init__(self):
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self._t0)

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # a tied head is saved once, under either name
    tied = {"lm_head.weight", "model.embed_tokens.weight"} if model.config.tie_word_embeddings else set()
    assert not unexpected and len(missing) <= 1 and set(missing) <= tied, (missing, unexpected)
    n_batch = len(prompts_text) * args.group_size
    rows = [{"prompt": m, "answer": a} for m, a in zip(prompts_text, answers)]
    data = Dataset.from_list(rows * (args.steps + 1))  # one batch of the same prompts per step

    def reward(prompts, completions, answer, **_):
        return [boxed_reward(c[0]["content"], a) for c, a in zip(completions, answer)]

    config = GRPOConfig(
        output_dir=out_dir, max_steps=args.steps + 1, learning_rate=args.learning_rate, max_grad_norm=1.0,
        per_device_train_batch_size=n_batch, gradient_accumulation_steps=1, num_generations=args.group_size,
        steps_per_generation=1, num_iterations=1, beta=0.0,
        max_completion_length=args.max_tokens, temperature=1.0, top_p=1.0, top_k=0, scale_rewards="none",
        loss_type="dapo", shuffle_dataset=False, use_cpu=True, bf16=False, fp16=False, report_to="none",
        save_strategy="no", logging_steps=1, disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )
    timer = StepTimer()
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data, processing_class=tok,
                          callbacks=[timer])
    return trainer, timer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5, help="timed steps per contender (after one warm-up step)")
    ap.add_argument("--threads", type=int, default=settings.get().num_threads)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--out", default="benchmarks/results/grpo-vs-trl.json")
    args = ap.parse_args()
    arl.configure(num_threads=args.threads)
    torch.set_num_threads(args.threads)

    cfg = grpo.Config()
    service = arl.ServiceClient(run_name="bench-grpo")
    train, _ = cfg.load_task()
    problems = train[: args.prompts]
    answers = [p.answer for p in problems]
    state = run_cold_start(cfg.cold_start(), train)
    start = cpu_busy_snapshot()

    def fresh_client():
        return service.create_training_client_from_state(state)

    tok = fresh_client().get_tokenizer()
    prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
    weights_path = Path(checkpoints.resolve(state)) / "model.safetensors"
    from safetensors.torch import load_file
    with tempfile.TemporaryDirectory() as out_dir:
        trl_trainer, timer = make_trl_trainer(models.model_dir(cfg.model), load_file(weights_path),
                                              [format_prompt(p) for p in problems], answers, args, out_dir)
        # Blocks, not interleaved steps: TRL's run goes on the engine thread as one call (see
        # arl/backend/local/engine.py: torch work from two threads slows both), ours before and after
        # it, so a drifting machine shows up as a difference between our two blocks.
        ours_recipe, ours_all = fresh_client(), fresh_client()
        results = {"recipe": [], "all": []}
        for block in range(2):
            for name, client in (("recipe", ours_recipe), ("all", ours_all)):
                our_step(client, tok, prompts, answers, args, 0, send_all=name == "all")  # warm-up
                results[name] += [our_step(client, tok, prompts, answers, args, block * 100 + i + 1,
                                           send_all=name == "all") for i in range(args.steps)]
            if block == 0:
                ENGINE.call(trl_trainer.train)
    t_trl = statistics.median(timer.times[1:])
    t_recipe = statistics.median(r["time"] for r in results["recipe"])
    t_all = statistics.median(r["time"] for r in results["all"])
    result = {
        "model": cfg.model, "threads": args.threads,
        "batch": f"{args.prompts} prompts x {args.group_size} samples, <= {args.max_tokens} new tokens",
        "trl_step_s": round(t_trl, 3),
        "ours_step_s (recipe)": round(t_recipe, 3),
        "ours_step_s (all 64 trained)": round(t_all, 3),
        "speedup (recipe)": round(t_trl / t_recipe, 2),
        "speedup (all trained)": round(t_trl / t_all, 2),
        "ours_sample_s (recipe)": round(statistics.median(r["sample"] for r in results["recipe"]), 3),
        "ours_step_s per block (recipe)": [round(statistics.median(r["time"] for r in block), 3) for block in
                                           (results["recipe"][:args.steps], results["recipe"][args.steps:])],
        "ours_new_tokens_per_step": statistics.median(r["new_tokens"] for r in results["recipe"]),
        "ours_trained_per_step (recipe)": statistics.median(r["trained"] for r in results["recipe"]),
        "other_cores_busy": round(other_cores_busy(start), 2),
    }
    for key, value in result.items():
        print(f"{key:32} {value}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
