"""Sampling a model the fast decoder does not implement (forward_decoder.py): a GPT-2-architecture
folder built here samples through the client API with the fast path's guarantees: seeded, independent
of the batch, stops where asked, and its logprobs are the trainer's."""

import asyncio

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import arl
from arl import models
from arl.backend.local.forward_decoder import ForwardDecoder
from arl.rollout import rl_datum, sft_datum
from conftest import AUTOCAST_MODES, LOGPROB_ATOL, TINY


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A 2-layer GPT-2 with random weights from a fixed seed and the tiny models' tokenizer."""
    folder = tmp_path_factory.mktemp("gpt2")
    tok = models.load_tokenizer(TINY)
    config = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=64, n_layer=2, n_head=4,
                        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        GPT2LMHeadModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tc(service, gpt2_folder):
    """A full fine-tuning client one large SFT step away from the random weights."""
    c = service.create_full_training_client(gpt2_folder, seed=0)
    tok = c.get_tokenizer()
    prompt = tok.encode("Q: 7+8= A:", add_special_tokens=False)
    c.forward_backward([sft_datum(prompt, tok.encode(" 15", add_special_tokens=False))], "cross_entropy")
    c.optim_step(arl.AdamParams(learning_rate=1e-2)).result()
    return c


def prompt_of(tc, text="Q: 12+30= A:"):
    return arl.ModelInput.from_ints(tc.get_tokenizer().encode(text, add_special_tokens=False))


def test_base_model_samples_through_its_forward(service, gpt2_folder):
    sampler = service.create_sampling_client(base_model=gpt2_folder)
    assert isinstance(sampler._sampler.decoder, ForwardDecoder)
    tok = models.load_tokenizer(gpt2_folder)
    res = sampler.sample(arl.ModelInput.from_ints(tok.encode("hello", add_special_tokens=False)), 2,
                         arl.SamplingParams(max_tokens=6, seed=0, stop=[])).result()
    assert [len(s.tokens) for s in res.sequences] == [6, 6]
    assert all(s.stop_reason == "length" for s in res.sequences)


def test_seeded_and_independent_of_the_batch(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    p, q = prompt_of(tc), prompt_of(tc, "the kitchen door is open and")
    params = arl.SamplingParams(max_tokens=10, seed=5, stop=[], top_p=0.9)
    alone = sampler.sample(p, 3, params).result()
    again = sampler.sample(p, 3, params).result()
    other = sampler.sample(p, 3, arl.SamplingParams(max_tokens=10, seed=6, stop=[], top_p=0.9)).result()
    assert [s.tokens for s in alone.sequences] == [s.tokens for s in again.sequences]
    assert [s.tokens for s in alone.sequences] != [s.tokens for s in other.sequences]
    assert len({tuple(s.tokens) for s in alone.sequences}) > 1

    async def beside_another():
        return await asyncio.gather(sampler.sample_async(q, 2, arl.SamplingParams(max_tokens=4, seed=1, stop=[])),
                                    sampler.sample_async(p, 3, params))

    _, batched = asyncio.run(beside_another())
    assert [s.tokens for s in batched.sequences] == [s.tokens for s in alone.sequences]
    for s, t in zip(alone.sequences, batched.sequences):
        np.testing.assert_allclose(s.logprobs, t.logprobs, atol=1e-5)


@pytest.mark.parametrize("autocast", AUTOCAST_MODES, indirect=True)
def test_logprobs_equal_trainer_logprobs(tc, autocast):
    """The fast path's tolerances (test_engine.py); a prompt long enough for the trainer's
    shared-prefix pass and one short enough for its padded pass."""
    sampler = tc.save_weights_and_get_sampling_client()
    for text in ("Q: 12+30= A:", "the kitchen door is open and the cat sat on the mat while Q: 3+4= A:"):
        prompt = prompt_of(tc, text).to_ints()
        res = sampler.sample(arl.ModelInput.from_ints(prompt), 4, arl.SamplingParams(max_tokens=12, seed=3)).result()
        out = tc.forward([rl_datum(prompt, s.tokens, s.logprobs, 1.0) for s in res.sequences],
                         "importance_sampling").result()
        for s, o in zip(res.sequences, out.loss_fn_outputs):
            np.testing.assert_allclose(o["logprobs"].to_numpy()[len(prompt) - 1:], s.logprobs,
                                       atol=LOGPROB_ATOL[autocast])
        full = arl.ModelInput.from_ints(prompt + res.sequences[0].tokens)
        scored = sampler.compute_logprobs(full).result()
        np.testing.assert_allclose(scored[len(prompt):], res.sequences[0].logprobs, atol=LOGPROB_ATOL[autocast])


def test_stop_sequences_and_tokens(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    tok = tc.get_tokenizer()
    p = prompt_of(tc)
    free = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=[])).result().sequences[0]
    assert free.stop_reason == "length" and len(free.tokens) == 20
    stop_id = free.tokens[5]
    hit = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=[stop_id])).result().sequences[0]
    assert hit.stop_reason == "stop" and hit.tokens == free.tokens[: free.tokens.index(stop_id) + 1]
    stop_str = tok.decode(free.tokens[8:10])
    by_str = sampler.sample(p, 1, arl.SamplingParams(max_tokens=20, seed=0, stop=stop_str)).result().sequences[0]
    assert by_str.stop_reason == "stop" and stop_str in by_str.text
    assert free.tokens[: len(by_str.tokens)] == by_str.tokens and len(by_str.tokens) <= 10


def test_train_step_then_sample(tc):
    """A step changes the weights the next sampler decodes: SFT towards a completion raises its
    greedy logprob, read off the sampler."""
    tok = tc.get_tokenizer()
    prompt = prompt_of(tc).to_ints()
    target = tok.encode(" 42", add_special_tokens=False)
    greedy = arl.SamplingParams(max_tokens=len(target), temperature=0.0, stop=[])
    before = tc.save_weights_and_get_sampling_client().compute_logprobs(
        arl.ModelInput.from_ints(prompt + target)).result()
    for _ in range(40):
        tc.forward_backward([sft_datum(prompt, target)], "cross_entropy")
        tc.optim_step(arl.AdamParams(learning_rate=1e-2))
    sampler = tc.save_weights_and_get_sampling_client()
    after = sampler.compute_logprobs(arl.ModelInput.from_ints(prompt + target)).result()
    assert sum(after[len(prompt):]) > sum(before[len(prompt):]) + 1.0
    assert sampler.sample(arl.ModelInput.from_ints(prompt), 1, greedy).result().sequences[0].tokens == target
