"""A script written the way the reference lab calls PyTRIO, running on the local engine.

Only the import and the model name differ from a PyTRIO script (`import pytrio as trio`,
`Qwen/Qwen3.5-4B`). It exercises what the reference chapters use: client creation, a cross-entropy
SFT step that reads `loss_fn_outputs`, GRPO groups with each built-in policy loss, a custom loss
(CISPO as the reference implements it), optimizer steps, sampler and state checkpoints, reloading,
and the async conventions (single await for sampling, double await for training calls).

    python examples/pytrio_style.py [--model arl/tiny-qwen3-0.5m] [--steps 2]
"""

import argparse
import asyncio
import re

import numpy as np
import torch

import arl as trio


def chat_prompt(tokenizer, question):
    messages = [{"role": "user", "content": f"{question} Put the answer in \\boxed{{}}."}]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)


def reward(text, answer):
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", text)
    return 1.0 if boxed and boxed[-1].strip() == answer else 0.0


def rl_datums(prompt_tokens, seqs, advantages):
    datums = []
    for seq, adv in zip(seqs, advantages):
        if adv == 0:
            continue
        assert len(seq.tokens) == len(seq.logprobs)
        n = len(prompt_tokens) - 1
        datums.append(trio.Datum(
            model_input=trio.ModelInput.from_ints(prompt_tokens + seq.tokens[:-1]),
            loss_fn_inputs={
                "target_tokens": np.array([0] * n + seq.tokens, dtype=np.int64),
                "logprobs": np.array([0.0] * n + seq.logprobs, dtype=np.float32),
                "advantages": np.array([0.0] * n + [adv] * len(seq.tokens), dtype=np.float32),
            },
        ))
    return datums


def cispo_loss(old_logprobs, advantages, low=0.0, high=4.0):
    def loss_fn(data, logprobs_list):
        total = torch.zeros(())
        for lp, old, adv in zip(logprobs_list, old_logprobs, advantages):
            ratio = torch.exp(lp - old)
            total = total - (torch.clamp(ratio, low, high).detach() * lp * adv).sum()
        return total, {"cispo/train_tokens": float(sum((a != 0).sum() for a in advantages))}
    return loss_fn


def main(model, steps, group):
    trio.configure(timeout=600, sampling_timeout=18000)
    service = trio.ServiceClient()
    assert model in service.get_supported_models()
    training_client = service.create_lora_training_client(base_model=model, rank=32, seed=0)
    tokenizer = training_client.get_tokenizer()
    stop = list(dict.fromkeys([tokenizer.eos_token, "<|im_end|>"]))
    problems = [("What is 3 + 4?", "7"), ("What is 10 - 6?", "4")]

    # SFT step with cross_entropy; the loss is recomputed from loss_fn_outputs as the reference does
    prompt = chat_prompt(tokenizer, problems[0][0])
    full = prompt + tokenizer.encode("\\boxed{7}<|im_end|>", add_special_tokens=False)
    weights = [0.0] * (len(prompt) - 1) + [1.0] * (len(full) - len(prompt))
    sft = trio.Datum(model_input=trio.ModelInput.from_ints(full[:-1]),
                     loss_fn_inputs={"target_tokens": np.array(full[1:], dtype=np.int32), "weights": np.array(weights)})
    out = training_client.forward_backward([sft], loss_fn="cross_entropy").result()
    lp = out.loss_fn_outputs[0]["logprobs"].to_numpy()
    sft_loss = -(lp * np.array(weights)).sum() / sum(weights)
    training_client.optim_step(trio.AdamParams(learning_rate=1e-4)).result()
    print(f"sft loss {sft_loss:.4f}")

    for step in range(steps):
        sampling_client = training_client.save_weights_and_get_sampling_client()
        loss_name = ["importance_sampling", "ppo", "cispo", "dro"][step % 4]
        datums, olds, advs = [], [], []
        for i, (question, answer) in enumerate(problems):
            prompt = chat_prompt(tokenizer, question)
            params = trio.SamplingParams(max_tokens=24, seed=step * 100 + i, stop=stop, temperature=1.0)
            result = sampling_client.sample(prompt=trio.ModelInput.from_ints(prompt), num_samples=group,
                                            sampling_params=params).result()
            rewards = [reward(s.text or tokenizer.decode(s.tokens), answer) for s in result.sequences]
            mean = sum(rewards) / len(rewards)
            # a degenerate group gets a small artificial spread so every loss path runs in this demo
            advantages = [r - mean for r in rewards] if len(set(rewards)) > 1 else [0.5, -0.5] * (group // 2)
            new = rl_datums(prompt, result.sequences, advantages)
            datums += new
            olds += [d.loss_fn_inputs["logprobs"].to_torch() for d in new]
            advs += [d.loss_fn_inputs["advantages"].to_torch() for d in new]
        if loss_name == "cispo":
            custom = [trio.Datum(model_input=d.model_input, loss_fn_inputs={"target_tokens": d.loss_fn_inputs["target_tokens"]})
                      for d in datums]
            fb = training_client.forward_backward_custom(custom, cispo_loss(olds, advs))
        else:
            config = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28} if loss_name == "ppo" else None
            fb = training_client.forward_backward(datums, loss_fn=loss_name, loss_fn_config=config)
        opt = training_client.optim_step(trio.AdamParams(learning_rate=4e-5))
        metrics = fb.result().metrics
        opt.result()
        loss = metrics.get("loss_mean", metrics.get("loss/mean", metrics["loss:sum"]))
        print(f"step {step} loss_fn={loss_name} datums={len(datums)} loss={loss:.4f}")

    sampler_path = training_client.save_weights_for_sampler(name="pytrio-style-final").result().path
    state_path = training_client.save_state(name="pytrio-style-state").result().path
    print("sampler_path", sampler_path)
    print("state_path", state_path)
    resumed = service.create_training_client_from_state_with_optimizer(state_path)
    reloaded = service.create_sampling_client(base_model=model, model_path=sampler_path)
    base_sampler = service.create_sampling_client(base_model=model)
    asyncio.run(async_round(resumed, reloaded, base_sampler, tokenizer, problems))
    print("usage", training_client.get_usage())


async def async_round(training_client, sampling_client, teacher, tokenizer, problems):
    prompts = [trio.ModelInput.from_ints(chat_prompt(tokenizer, q)) for q, _ in problems]
    params = trio.SamplingParams(max_tokens=16, seed=0)
    results = await asyncio.gather(*[sampling_client.sample_async(prompt=p, num_samples=2, sampling_params=params)
                                     for p in prompts])
    datums = []
    for p, res in zip(prompts, results):
        for seq in res.sequences:
            full = trio.ModelInput.from_ints(p.to_ints() + seq.tokens)
            teacher_lp = await teacher.compute_logprobs_async(full)
            assert teacher_lp[0] is None
            reverse_kl = np.array(seq.logprobs) - np.array(teacher_lp[p.length:])
            n = p.length - 1
            datums.append(trio.Datum(model_input=trio.ModelInput.from_ints(p.to_ints() + seq.tokens[:-1]), loss_fn_inputs={
                "target_tokens": [0] * n + seq.tokens, "logprobs": [0.0] * n + seq.logprobs,
                "advantages": [0.0] * n + (-reverse_kl).tolist()}))
    fb_future = await training_client.forward_backward_async(datums, loss_fn="importance_sampling")
    opt_future = await training_client.optim_step_async(trio.AdamParams(learning_rate=1e-5))
    fb, opt = await fb_future, await opt_future
    print(f"async OPD step: loss={fb.metrics['loss:sum']:.4f} grad_norm={opt.metrics['optim/grad_norm']:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="arl/tiny-qwen3-0.5m")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    args = ap.parse_args()
    main(args.model, args.steps, args.group)
