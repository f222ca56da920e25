"""Images through the client API on the tiny Qwen2-VL model: the architecture and processor are
transformers' own, image prompts sample, score and train, sampler and trainer agree on them, a group
shares one image prefill, image positions never carry weight, and bad image input fails clearly."""

import io

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

import arl
from arl import models
from arl.backend.local import decoder as decoder_mod
from arl.models.images import extend, image_chunk, split_at_image_pads
from arl.rollout import rl_datum, sft_datum
from conftest import TINY

VLM = "arl/tiny-qwen2-vl-3m"


def png(colour="red", size=(112, 112)) -> bytes:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).ellipse((12, 12, 52, 52), fill=colour)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def processor():
    return models.load_image_processor(VLM)


@pytest.fixture(scope="module")
def vlm(service):
    """A LoRA client one large step from its base, so a wrongly merged sampler would show."""
    c = service.create_lora_training_client(VLM, rank=8, seed=0)
    tok = c.get_tokenizer()
    ids = tok.encode("The dot is red and the kitchen door is open.", add_special_tokens=False)
    c.forward_backward([arl.Datum(model_input=arl.ModelInput.from_ints(ids[:-1]),
                                  loss_fn_inputs={"target_tokens": ids[1:]})], "cross_entropy")
    c.optim_step(arl.AdamParams(learning_rate=2e-2)).result()
    return c


def image_prompt(client, processor, data: bytes, question="What colour is the dot?") -> arl.ModelInput:
    tok = client.get_tokenizer()
    ids = tok.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}],
                                  add_generation_prompt=True, tokenize=True, return_dict=False)
    return split_at_image_pads(ids, [image_chunk(data, processor)], tok.convert_tokens_to_ids("<|image_pad|>"))


def test_tiny_vlm_is_qwen2_vl_with_its_own_processor(processor):
    loaded = models.load_model(VLM)
    assert type(loaded.model).__name__ == "Qwen2VLForConditionalGeneration" and loaded.is_vision
    assert type(processor).__name__.startswith("Qwen2VLImageProcessor")
    # the reference lab's formula: patches // merge_size**2 (112 px = 8x8 patches of 14 px, merged 2x2)
    assert image_chunk(png(), processor).expected_tokens == processor.get_number_of_image_patches(112, 112) // 4 == 16
    assert image_chunk(png(size=(224, 56)), processor).expected_tokens == 16
    again = models.load_model(VLM)
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.state_dict().values(), again.model.state_dict().values()))


def test_prompt_is_split_at_the_image_placeholder(vlm, processor):
    prompt = image_prompt(vlm, processor, png())
    kinds = [c.type for c in prompt.chunks]
    assert kinds == ["encoded_text", "image", "encoded_text"]
    tok = vlm.get_tokenizer()
    assert prompt.chunks[0].tokens[-1] == tok.convert_tokens_to_ids("<|vision_start|>")
    assert prompt.chunks[2].tokens[0] == tok.convert_tokens_to_ids("<|vision_end|>")


def test_sampler_and_trainer_agree_on_an_image_prompt(vlm, processor):
    sampler = vlm.save_weights_and_get_sampling_client()
    prompts = [image_prompt(vlm, processor, png("red")), image_prompt(vlm, processor, png("blue", (224, 56)))]
    futures = [sampler.sample(p, 3, arl.SamplingParams(max_tokens=10, seed=5)) for p in prompts]
    pairs = [(p, s) for p, f in zip(prompts, futures) for s in f.result().sequences]
    data = [rl_datum(p, s.tokens, s.logprobs, 1.0) for p, s in pairs]
    out = vlm.forward(data, "importance_sampling").result()
    for (p, s), o in zip(pairs, out.loss_fn_outputs):
        np.testing.assert_allclose(o["logprobs"].to_numpy()[p.length - 1:], s.logprobs, atol=1e-4)
        scored = sampler.compute_logprobs(extend(p, s.tokens)).result()
        np.testing.assert_allclose(scored[p.length:], s.logprobs, atol=1e-4)


def test_the_image_reaches_the_model(vlm, processor):
    sampler = vlm.save_weights_and_get_sampling_client()
    red, blue = (sampler.compute_logprobs(image_prompt(vlm, processor, png(c))).result() for c in ("red", "blue"))
    assert abs(red[-1] - blue[-1]) > 1e-5  # the same text after two different images


def test_image_positions_are_context_with_zero_weight(vlm, processor):
    prompt = image_prompt(vlm, processor, png())
    n_image = prompt.chunks[1].expected_tokens
    start = prompt.chunks[0].length
    datum = sft_datum(prompt, [5, 6, 7])
    assert datum.model_input.length == prompt.length + 2
    weights = datum.loss_fn_inputs["weights"].to_numpy()
    assert not weights[: prompt.length - 1].any() and weights[prompt.length - 1:].tolist() == [1, 1, 1]
    scored = vlm.save_weights_and_get_sampling_client().compute_logprobs(prompt).result()
    assert scored[start:start + n_image] == [None] * n_image  # image positions are not predicted tokens
    assert all(x is not None for x in scored[start + n_image:])


def test_a_group_shares_one_image_prefill(vlm, processor, monkeypatch):
    calls = []
    real = decoder_mod.Decoder.vision_prompt
    monkeypatch.setattr(decoder_mod.Decoder, "vision_prompt", lambda self, *a: calls.append(1) or real(self, *a))
    sampler = vlm.save_weights_and_get_sampling_client()
    prompt = image_prompt(vlm, processor, png())
    sampler.sample(prompt, 8, arl.SamplingParams(max_tokens=4, seed=1)).result()
    assert len(calls) == 1 and sampler.get_usage()["prefill_tokens"] == prompt.length


def test_same_seed_same_samples_with_images(vlm, processor):
    sampler = vlm.save_weights_and_get_sampling_client()
    prompt = image_prompt(vlm, processor, png())
    a, b = (sampler.sample(prompt, 4, arl.SamplingParams(max_tokens=8, seed=11)).result() for _ in range(2))
    assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]


def test_training_on_image_datums_changes_the_language_model_only(service, processor):
    tc = service.create_lora_training_client(VLM, rank=4, seed=0)
    names = [n for n, p in tc._trainer.model.named_parameters() if p.requires_grad]
    assert names and not any("visual" in n for n in names)
    prompt = image_prompt(tc, processor, png())
    before = tc.save_weights_and_get_sampling_client().compute_logprobs(extend(prompt, [40, 41])).result()[-1]
    tc.forward_backward([sft_datum(prompt, [40, 41])], "cross_entropy")
    tc.optim_step(arl.AdamParams(learning_rate=5e-2)).result()
    after = tc.save_weights_and_get_sampling_client().compute_logprobs(extend(prompt, [40, 41])).result()[-1]
    assert after > before


def test_full_fine_tune_trains_the_vision_tower_too(service, processor):
    tc = service.create_full_training_client(VLM, seed=0)
    prompt = image_prompt(tc, processor, png())
    tc.forward_backward([sft_datum(prompt, [40, 41])], "cross_entropy").result()
    visual = [p.grad for n, p in tc._trainer.model.named_parameters() if "visual" in n]
    assert visual and all(g is not None for g in visual) and any(g.abs().sum() > 0 for g in visual)


def test_an_image_for_a_text_only_model_is_refused(service, processor):
    tc = service.create_full_training_client(TINY, seed=0)
    prompt = arl.ModelInput(chunks=[arl.EncodedTextChunk(tokens=[1, 2]), image_chunk(png(), processor),
                                    arl.EncodedTextChunk(tokens=[3])])
    with pytest.raises(ValueError, match="text-only model"):
        tc.save_weights_and_get_sampling_client().sample(prompt, 1, arl.SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match=r"data\[0\].*text-only model"):
        tc.forward_backward([sft_datum(prompt, [4, 5])], "cross_entropy")
    with pytest.raises(models.ModelNotFoundError, match="text-only"):
        models.load_image_processor(TINY)


def test_a_wrong_expected_tokens_is_refused_before_work(vlm, processor):
    bad = arl.ModelInput(chunks=[arl.EncodedTextChunk(tokens=[1, 2]),
                                 arl.ImageChunk(data=png(), format="png", expected_tokens=15),
                                 arl.EncodedTextChunk(tokens=[3])])
    with pytest.raises(ValueError, match=r"chunks\[1\]\.expected_tokens is 15.*makes 16.*image_chunk"):
        vlm.save_weights_and_get_sampling_client().sample(bad, 1, arl.SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match=r"data\[0\]\.model_input\.chunks\[1\]\.expected_tokens"):
        vlm.forward_backward([sft_datum(bad, [4, 5])], "cross_entropy")


def test_an_unreadable_image_is_refused(vlm):
    truncated = png()[:40]  # a PNG header, then nothing
    bad = arl.ModelInput(chunks=[arl.EncodedTextChunk(tokens=[1]),
                                 arl.ImageChunk(data=truncated, format="png", expected_tokens=16)])
    with pytest.raises(ValueError, match=r"chunks\[1\]\.data: the image cannot be decoded"):
        vlm.save_weights_and_get_sampling_client().compute_logprobs(bad)
    with pytest.raises(ValueError, match="neither PNG nor JPEG"):
        image_chunk(b"GIF89a....", None)
    with pytest.raises(ValueError, match="placeholders for 2 images"):
        split_at_image_pads([1, 2047, 3], [image_chunk(png(), models.load_image_processor(VLM))] * 2, 2047)


def zoom(region: str) -> str:
    """Render one region of the figure larger.

    Args:
        region: which part to show, e.g. "left".
    """
    return region


class ZoomEnv:
    """A figure in the opening message; the zoom tool answers with an image (and a caption)."""

    tools = (zoom,)
    truncation_reward = 0.0

    def __init__(self, full: bytes, window: bytes):
        self.full, self.window = full, window

    def initial_messages(self):
        return [{"role": "user", "content": [{"type": "image", "image": self.full},
                                             {"type": "text", "text": "What colour is the dot?"}]}]

    def step(self, message):
        from arl.envs import MalformedCall, StepResult, parse_tool_calls

        calls = parse_tool_calls(message["content"])
        if isinstance(calls, MalformedCall):
            return StepResult([], 0.0, True, "malformed_call")
        if calls:
            return StepResult([{"role": "tool", "content": [{"type": "image", "image": self.window},
                                                            {"type": "text", "text": "the left half"}]}],
                              metrics={"tool_calls": 1.0})
        return StepResult([], 1.0, True, "answered")


class Scripted:
    """Turn k of every branch writes script[k]; records each input it was asked to continue."""

    def __init__(self, chat, script):
        self.chat, self.script, self.inputs = chat, script, []

    def sample(self, prompt, num_samples, params):
        self.inputs.append(prompt)
        images = sum(isinstance(c, arl.ImageChunk) for c in prompt.chunks)
        tokens = self.chat.assistant_tokens(self.script[min(images - 1, len(self.script) - 1)])
        seq = arl.SampledSequence(stop_reason="stop", tokens=tokens, logprobs=[-0.5] * len(tokens), text=None)
        return arl.APIFuture.completed(arl.SampleResponse(sequences=[seq] * num_samples))


def test_image_observations_enter_the_multi_turn_stream(service, processor):
    """The opening figure and a tool's image ride in the token stream on their placeholder positions (source
    P / O), the sampler gets them as image chunks in order, and a trajectory datum built from the stream puts
    weight only on the policy's tokens; the trainer and the sampler score that two-image stream alike."""
    from arl.envs import format_tool_call
    from arl.models.images import with_images
    from arl.rollout import Budgets, ChatTokens, rollout_groups, trajectory_datum

    tc = service.create_full_training_client(VLM, seed=0)
    tok = tc.get_tokenizer()
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    chat = ChatTokens(tok, processor=processor)
    full, window = png("red", (224, 56)), png("blue")
    sampler = Scripted(chat, [format_tool_call("zoom", {"region": "left"}), "Red. \\boxed{A}"])
    (traj,) = rollout_groups(sampler, [[ZoomEnv(full, window)]], chat, Budgets(max_turns=3), 1.0, 0)[0]
    assert traj.stop_reason == "answered" and [c.data for c in traj.prompt_images] == [full]
    assert [c.data for c in traj.images] == [window] and traj.turns[0].observations == ["[image, 16 positions]the left half"]
    n_full, n_window = traj.prompt_images[0].expected_tokens, traj.images[0].expected_tokens
    assert traj.prompt.count(pad) == n_full and traj.tokens.count(pad) == n_window
    assert {traj.source[i] for i, t in enumerate(traj.tokens) if t == pad} == {"O"}
    second = sampler.inputs[1]
    assert [c.data for c in second.chunks if isinstance(c, arl.ImageChunk)] == [full, window]
    assert second.length == len(traj.prompt) + len(traj.turns[0].tokens)
    with pytest.raises(ValueError, match="no image processor"):
        rollout_groups(sampler, [[ZoomEnv(full, window)]], ChatTokens(tok), Budgets(), 1.0, 0)

    prompt = with_images(traj.prompt, traj.prompt_images, pad)
    datum = trajectory_datum(prompt, traj.tokens, traj.mask, traj.logprobs, 1.0, traj.images, pad)
    assert [c.type for c in datum.model_input.chunks].count("image") == 2
    assert datum.model_input.length == len(traj.prompt) + len(traj.tokens) - 1
    adv = datum.loss_fn_inputs["advantages"].to_numpy()[len(traj.prompt) - 1:]
    assert adv.tolist() == [float(m) for m in traj.mask]

    real = tc.save_weights_and_get_sampling_client()
    stream = with_images(traj.prompt + traj.tokens, traj.prompt_images + traj.images, pad)
    scored = real.compute_logprobs(stream).result()
    trained = tc.forward([datum], "importance_sampling").result().loss_fn_outputs[0]["logprobs"].to_numpy()
    policy = [len(traj.prompt) + i for i, m in enumerate(traj.mask) if m]
    np.testing.assert_allclose([trained[p - 1] for p in policy], [scored[p] for p in policy], atol=1e-4)


def test_the_env_check_accepts_image_content_and_refuses_malformed_parts():
    from arl.envs import check_env

    check_env(ZoomEnv(png(), png("blue")))

    class NoBytes(ZoomEnv):
        def initial_messages(self):
            return [{"role": "user", "content": [{"type": "image", "image": "not-bytes"}]}]
    with pytest.raises(AssertionError, match="text/image parts"):
        check_env(NoBytes(png(), png()))


def test_spec_o3_episode_stream_masks_and_demonstration(service, processor):
    """A Spec-o3 episode on the tiny VLM (a zoom into the deciding window, then the answer): the tool's PNG
    enters the stream as an observation, only the policy's tokens carry advantage, and the written
    demonstration of the same conversation lays out the same stream with the same images."""
    from arl.data import spectra
    from arl.envs import format_tool_call
    from arl.envs.spec_o3 import SpecEnv
    from arl.models.images import with_images
    from arl.rollout import Budgets, ChatTokens, rollout_groups, sft_datum, trajectory_datum
    from arl.rollout.multiturn import demonstration_images

    tok = service.create_full_training_client(VLM, seed=0).get_tokenizer()
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    chat = ChatTokens(tok, processor=processor)
    q = spectra.make_split(0, 0, 1)[2][0]
    call = format_tool_call(spectra.TOOL_NAME, {"wavelength_range": list(q.deciding_window)})
    answer = f"Seen. <answer>\\boxed{{{q.answer}}}</answer>"
    (traj,) = rollout_groups(Scripted(chat, [call, answer]), [[SpecEnv(q)]], chat, Budgets(max_turns=3), 1.0, 0)[0]
    assert traj.reward == 1.0 and traj.stop_reason == "answered"
    assert [c.data for c in traj.images] == [spectra.visualize(q.spectrum, list(q.deciding_window))]
    written = [t for text in (call, answer) for t in chat.assistant_tokens(text)]
    prompt = with_images(traj.prompt, traj.prompt_images, pad)
    datum = trajectory_datum(prompt, traj.tokens, traj.mask, traj.logprobs, 1.0, traj.images, pad)
    targets, adv = datum.loss_fn_inputs["target_tokens"].tolist(), datum.loss_fn_inputs["advantages"].tolist()
    assert [t for t, a in zip(targets, adv) if a != 0] == written
    messages = [{"role": "assistant", "content": call},
                {"role": "tool", "content": [{"type": "image", "image": traj.images[0].data}]},
                {"role": "assistant", "content": answer}]
    demo_prompt, tokens, source, images = demonstration_images(chat, SpecEnv(q).initial_messages(), SpecEnv(q).tools,
                                                               messages, 64)
    assert (tokens, source, [c.data for c in images]) == (traj.tokens, traj.source, [c.data for c in traj.images])
    assert demo_prompt == prompt
    weights = sft_datum(demo_prompt, tokens, [int(s == "A") for s in source], images, pad).loss_fn_inputs["weights"]
    assert [t for t, w in zip(targets, weights.tolist()) if w != 0] == written
