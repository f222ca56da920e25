"""Multi-turn rollouts: a token stream that only grows, and a per-token record of who wrote it.

The first turn samples a whole group from the shared prompt (one request, `num_samples` = group
size); from then on each branch continues on its own, every live branch's request in flight at once
(the local sampler decodes them as one batch). Between turns nothing is re-tokenised: the sampled
tokens stay as they are, and the chat template's closing tokens, the observation and the next
generation header are appended as tokens. Each token carries a source letter:

    P  prompt (system, tools, user)      A  action: sampled by the policy (the only ones trained)
    T  template (closing, headers)       O  observation (tool or environment output)

Budgets end a trajectory with a named reason (`TRUNCATIONS`); an environment ends it with its own
("answered", "malformed_call", ...). Observations longer than `max_observation_tokens` are cut and
marked with `OBSERVATION_MARKER`.

Images: a message's content may be a list of parts, `{"type": "text", "text": ...}` and
`{"type": "image", "image": <PNG or JPEG bytes>}` (a vision model's opening figure, a tool's rendered
window). In the stream an image takes its `expected_tokens` `<|image_pad|>` positions between
`<|vision_start|>` and `<|vision_end|>` (source P in the prompt, O in an observation), and the images
travel beside the ids in order (`Trajectory.prompt_images`, `Turn.images`); `arl.models.images.with_images`
turns the two into the `ModelInput` the sampler and the datums take. Only the text of an image
observation counts against `max_observation_tokens`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..models.images import IMAGE_PAD, image_chunk, with_images
from ..tools.calls import tool_schema
from ..types import ImageChunk, ModelInput, SamplingParams
from .seeds import branch_request

if TYPE_CHECKING:
    from ..envs.base import Env

POLICY, TEMPLATE, OBSERVATION, PROMPT = "A", "T", "O", "P"
OBSERVATION_MARKER = "\n[observation truncated]"
TOOL_PREAMBLE = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
                 "function signatures within <tools></tools> XML tags:\n<tools>\n{schemas}\n</tools>\n\nFor each function "
                 "call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:"
                 '\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>')
"""Qwen3's tool preamble, for chat templates that drop `tools=`."""
TRUNCATIONS = {
    "max_turns": "the turn budget ran out before the environment ended the episode",
    "max_tool_calls": "the turn made a tool call beyond the tool-call budget",
    "turn_too_long": "a turn hit max_tokens_per_turn without ending",
    "max_trajectory_tokens": "the next turn or observation would not fit in max_trajectory_tokens",
}


@dataclass(frozen=True)
class Budgets:
    max_turns: int = 4
    """Assistant turns per trajectory."""
    max_tool_calls: int = 3
    """Tool calls per trajectory."""
    max_tokens_per_turn: int = 64
    """Sampled tokens per assistant turn."""
    max_trajectory_tokens: int = 1024
    """Prompt + every turn + every observation."""
    max_observation_tokens: int = 128
    """Tokens of one observation's content; longer ones are cut and marked."""

    def validate(self) -> None:
        for name in ("max_turns", "max_tool_calls", "max_tokens_per_turn", "max_trajectory_tokens", "max_observation_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be at least 1")


@dataclass
class Turn:
    """One assistant turn and what was appended after it, as stored in rollouts.jsonl."""

    tokens: list[int]
    """The sampled tokens, then the appended ones (template closing, observations, next header)."""
    source: str
    """One letter per token (A, T, O; see the module doc)."""
    logprobs: list[float]
    """The sampler's logprob of each sampled token; 0.0 at appended tokens."""
    text: str
    """The assistant message the environment saw (sampled tokens decoded, end-of-turn token removed)."""
    observations: list[str] = field(default_factory=list)
    reward: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    images: list[ImageChunk] = field(default_factory=list)
    """The observation images appended after the turn, in order (their positions are in `tokens`)."""

    def to_json(self, save_image=None) -> dict:
        """The turn as a row; `save_image` (`RunDir.save_image`) stores its images and names them."""
        out = {"tokens": self.tokens, "source": self.source, "logprobs": self.logprobs, "text": self.text,
               "observations": self.observations, "reward": self.reward, "metrics": self.metrics}
        if self.images and save_image is not None:
            out["images"] = [save_image(c.data) for c in self.images]
        return out


@dataclass
class Trajectory:
    prompt: list[int]
    turns: list[Turn]
    reward: float = 0.0
    """The episode's reward: the sum of its turns' rewards, or the truncation reward."""
    stop_reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-turn counts summed over the episode (tool_calls, tool_errors, ...), plus `turns`."""
    prompt_images: list[ImageChunk] = field(default_factory=list)
    """The images of the prompt, in order (their positions are in `prompt`)."""
    image_pad_id: int | None = None
    """The tokenizer's `<|image_pad|>` id, which the images' positions hold."""

    @property
    def model_prompt(self) -> list[int] | ModelInput:
        """The prompt as a datum takes it: token ids, or a `ModelInput` with its images in place."""
        return with_images(self.prompt, self.prompt_images, self.image_pad_id) if self.prompt_images else self.prompt

    @property
    def truncated(self) -> bool:
        """Cut short by a budget, as opposed to ended by the environment."""
        return self.stop_reason in TRUNCATIONS

    @property
    def tokens(self) -> list[int]:
        """Everything after the prompt."""
        return [t for turn in self.turns for t in turn.tokens]

    @property
    def source(self) -> str:
        return "".join(turn.source for turn in self.turns)

    @property
    def mask(self) -> list[int]:
        """1 at the tokens the policy sampled, 0 at template and observation tokens."""
        return [int(s == POLICY) for s in self.source]

    @property
    def logprobs(self) -> list[float]:
        return [lp for turn in self.turns for lp in turn.logprobs]

    @property
    def images(self) -> list[ImageChunk]:
        """The observation images inside `tokens`, in order (the prompt's are `prompt_images`)."""
        return [c for turn in self.turns for c in turn.images]

    def to_json(self, save_image=None) -> dict:
        """The episode as a rollout row (its advantage, a training step's value, is the caller's to add);
        `save_image` (`RunDir.save_image`) stores its images, which the row then names."""
        out = {"prompt_tokens": self.prompt, "turns": [t.to_json(save_image) for t in self.turns], "reward": self.reward,
               "stop_reason": self.stop_reason, "truncated": self.truncated, "metrics": self.metrics}
        if self.prompt_images and save_image is not None:
            out["images"] = [save_image(c.data) for c in self.prompt_images]
        return out


class ChatTokens:
    """The chat template's pieces as tokens, found by rendering probe conversations: what closes an
    assistant turn, and how observation messages (and the next generation header) are laid out."""

    _PROBE = [{"role": "user", "content": "u"}]
    _SLOT = "\ue000{}\ue000"
    """Stands in for an image-bearing observation while the template lays the messages out."""

    def __init__(self, tokenizer, tool_schemas: bool = True, processor=None):
        self.tokenizer = tokenizer
        self.tool_schemas = tool_schemas
        self.processor = processor
        """A vision model's image processor (`arl.models.load_image_processor`): needed for image parts."""
        head = self._render(self._PROBE, True)
        closed = self._render(self._PROBE + [{"role": "assistant", "content": "x"}], False)
        if not closed.startswith(head + "x"):
            raise ValueError("chat template: an assistant turn does not extend the generation prompt; "
                             "multi-turn rollouts need a template whose renderings are prefixes of each other")
        self.closing = self.encode(closed[len(head) + 1:])
        self._specials = [t for t in tokenizer.all_special_tokens if t]

    def _render(self, messages: list[dict], generation_prompt: bool, tools: list[dict] | None = None) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def prompt(self, messages: list[dict], tools: Sequence) -> list[int]:
        """The opening messages with the tool schemas (unless `tool_schemas` is off) and the generation
        header. A template that ignores `tools=` (SmolLM2's) gets Qwen's tool preamble appended to the
        system message instead, so the model is always told the tools and the call format."""
        schemas = [tool_schema(t) for t in tools] if self.tool_schemas and tools else None
        text = self._render(messages, True, schemas)
        if schemas and text == self._render(messages, True):
            preamble = TOOL_PREAMBLE.format(schemas="\n".join(json.dumps(s) for s in schemas))
            if messages[0]["role"] == "system":
                messages = [{"role": "system", "content": messages[0]["content"] + "\n\n" + preamble}, *messages[1:]]
            else:
                messages = [{"role": "system", "content": preamble}, *messages]
            text = self._render(messages, True)
        return self.encode(text)

    def prompt_stream(self, messages: list[dict], tools: Sequence) -> tuple[list[int], list[ImageChunk]]:
        """`prompt` for messages that may hold image parts: (ids with each image on its `expected_tokens`
        placeholder positions, the images in order)."""
        images = [self._image(part["image"]) for m in messages if not isinstance(m["content"], str)
                  for part in m["content"] if part["type"] == "image"]
        ids = self.prompt(messages, tools)
        if not images:
            return ids, []
        pad = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        at = [i for i, t in enumerate(ids) if t == pad]
        if len(at) != len(images):
            raise ValueError(f"chat template rendered {len(at)} {IMAGE_PAD} for {len(images)} image parts")
        out, start = [], 0
        for i, image in zip(at, images):
            out += ids[start:i] + [pad] * image.expected_tokens
            start = i + 1
        return out + ids[start:], images

    def _image(self, data: bytes) -> ImageChunk:
        if self.processor is None:
            raise ValueError("a message holds an image, but ChatTokens has no image processor: build it with "
                             "processor=arl.models.load_image_processor(model) (a vision-language model)")
        return image_chunk(data, self.processor)

    def _observation(self, content, max_observation_tokens: int) -> tuple[list[int], str, list[ImageChunk]]:
        """(ids, text for the log, images) of one observation's content: its text sanitised and cut to
        `max_observation_tokens`, each image as `<|vision_start|>`, its placeholders, `<|vision_end|>`."""
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        ids, text, images, budget = [], [], [], max_observation_tokens
        for part in parts:
            if part["type"] == "image":
                image = self._image(part["image"])
                images.append(image)
                ids += self.encode("<|vision_start|>") + [self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)] * \
                    image.expected_tokens + self.encode("<|vision_end|>")
                text.append(f"[image, {image.expected_tokens} positions]")
                continue
            piece = self.encode(self.sanitise(part["text"]))
            if len(piece) > budget:
                marker = self.encode(OBSERVATION_MARKER)
                piece = piece[:max(budget - len(marker), 0)] + marker
            budget = max(budget - len(piece), 0)
            ids += piece
            text.append(self.tokenizer.decode(piece))
        return ids, "".join(text), images

    def sanitise(self, text: str) -> str:
        """Observation text with special-token spellings defused, so a tool cannot close the turn."""
        for special in self._specials:
            text = text.replace(special, special.replace("<", "&lt;"))
        return text

    def assistant_tokens(self, content: str) -> list[int]:
        """A written assistant message as the policy would sample it (demonstrations): content, end-of-turn."""
        return self.encode(content) + [self.tokenizer.eos_token_id]

    def after_turn(self, sampled: Sequence[int], observations: Sequence[dict], max_observation_tokens: int,
                   next_turn: bool = True) -> tuple[list[int], str, list[str], list[ImageChunk]]:
        """(tokens, sources, observation texts, observation images) to append after a turn's sampled
        tokens: the part of the template's closing the sampler did not produce, each observation message
        (its text cut to `max_observation_tokens`; an image on its placeholder positions), and, when
        `next_turn`, the next generation header."""
        overlap = max((k for k in range(len(self.closing) + 1) if list(sampled[len(sampled) - k:]) == self.closing[:k]),
                      default=0)
        tokens, source = self.closing[overlap:], TEMPLATE * (len(self.closing) - overlap)
        if not observations:
            return tokens, source, [], []
        encoded = [self._observation(m["content"], max_observation_tokens) for m in observations]
        # a text observation is laid out as its decoded text (the template may only wrap it); one with an
        # image as a slot string, whose place in the layout its ids then take
        shown = [text if isinstance(m["content"], str) else self._SLOT.format(k)
                 for k, (m, (_, text, _)) in enumerate(zip(observations, encoded))]
        base = self._PROBE + [{"role": "assistant", "content": "x"}]
        closed = self._render(base, False)
        full = self._render(base + [{**m, "content": t} for m, t in zip(observations, shown)], next_turn)
        if not full.startswith(closed):
            raise ValueError("chat template: observations do not extend the conversation")
        layout, pos = full[len(closed):], 0
        for (ids, _, _), text in zip(encoded, shown):
            at = layout.find(text, pos)
            wrapper = self.encode(layout[pos:at])
            tokens = tokens + wrapper + ids
            source += TEMPLATE * len(wrapper) + OBSERVATION * len(ids)
            pos = at + len(text)
        tail = self.encode(layout[pos:])
        return (tokens + tail, source + TEMPLATE * len(tail), [text for _, text, _ in encoded],
                [c for _, _, images in encoded for c in images])

    def strip_end(self, sampled: Sequence[int]) -> str:
        """The assistant message of sampled tokens: decoded with special tokens kept (a `<tool_call>`
        tag is one), without the end-of-turn token."""
        ids = list(sampled)
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            ids = ids[:-1]
        return self.tokenizer.decode(ids)


def demonstration_stream(chat: ChatTokens, opening: list[dict], tools: Sequence, messages: Sequence[dict],
                         max_observation_tokens: int) -> tuple[list[int], list[int], str]:
    """(prompt, tokens, sources) of a written conversation (`messages`: the assistant and tool turns after
    `opening`), laid out exactly as a rollout in which the policy wrote those assistant turns: so SFT
    on demonstrations trains the same token streams that RL later samples and trains. Text only; a
    conversation with images: `demonstration_images`."""
    prompt, tokens, source, images = demonstration_images(chat, opening, tools, messages, max_observation_tokens)
    if images or any(isinstance(c, ImageChunk) for c in prompt.chunks):
        raise ValueError("demonstration_stream: the conversation holds images; use demonstration_images")
    return prompt.to_ints(), tokens, source


def demonstration_images(chat: ChatTokens, opening: list[dict], tools: Sequence, messages: Sequence[dict],
                         max_observation_tokens: int) -> tuple[ModelInput, list[int], str, list[ImageChunk]]:
    """`demonstration_stream` for a conversation that may hold images: (the prompt as a `ModelInput`,
    tokens, sources, the observation images inside the tokens in order)."""
    prompt_ids, prompt_images = chat.prompt_stream(opening, tools)
    tokens, source, images = [], "", []
    i = 0
    while i < len(messages):
        if messages[i]["role"] != "assistant":
            raise ValueError(f"demonstration message {i}: expected an assistant turn, got {messages[i]['role']!r}")
        sampled = chat.assistant_tokens(messages[i]["content"])
        j = i + 1
        while j < len(messages) and messages[j]["role"] != "assistant":
            j += 1
        after, after_source, _, seen = chat.after_turn(sampled, messages[i + 1:j], max_observation_tokens) \
            if j > i + 1 else ([], "", [], [])
        tokens += sampled + after
        source += POLICY * len(sampled) + after_source
        images += seen
        i = j
    pad = chat.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    prompt = with_images(prompt_ids, prompt_images, pad) if prompt_images else ModelInput.from_ints(prompt_ids)
    return prompt, tokens, source, images


@dataclass
class _Branch:
    env: Env
    prompt: list[int]
    prompt_images: list[ImageChunk] = field(default_factory=list)
    image_pad_id: int | None = None
    turns: list[Turn] = field(default_factory=list)
    length: int = 0
    tool_calls: int = 0
    reward: float = 0.0
    stop_reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    def end(self, reason: str, reward: float | None = None) -> None:
        self.stop_reason = reason
        if reward is not None:
            self.reward = reward

    def trajectory(self) -> Trajectory:
        return Trajectory(self.prompt, self.turns, self.reward, self.stop_reason,
                          {**self.metrics, "turns": float(len(self.turns))}, self.prompt_images, self.image_pad_id)

    def stream(self, image_pad_id: int) -> ModelInput:
        """Everything so far (prompt, turns, observations) as the sampler's input, images in place."""
        ids = self.prompt + [x for turn in self.turns for x in turn.tokens]
        images = self.prompt_images + [c for turn in self.turns for c in turn.images]
        return with_images(ids, images, image_pad_id) if images else ModelInput.from_ints(ids)


def rollout_groups(sampler, groups: Sequence[Sequence[Env]], chat: ChatTokens, budgets: Budgets,
                   temperature: float, seed: int, workers: int = 8,
                   prompts: Sequence[Sequence[int]] | None = None) -> list[list[Trajectory]]:
    """Play every group's episodes to the end; returns one trajectory per environment, in order.

    All environments of a group must open with the same messages (they are one prompt's branches).
    `prompts` (one per group) starts each group from a token stream instead of its rendered opening: a
    game part-played (TEMPO's macro-steps), its environments already holding that history and the stream
    ending with the next generation header. Each trajectory's `prompt` is then that stream.
    `seed` is the step's `seeds.request_seed(run_seed, step)`; turn t of branch b of group g is sampled
    with seed `seed + branch_request(t, g, b)` (turn 0: one request per group, branch 0), so a rollout
    is reproducible and no two requests of a run share a seed.
    """
    pad = chat.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    branches: list[list[_Branch]] = []
    for g, envs in enumerate(groups):
        opening = [e.initial_messages() for e in envs]
        if any(o != opening[0] for o in opening):
            raise ValueError(f"group {g}: its environments open with different messages; a group shares one prompt")
        prompt, images = chat.prompt_stream(opening[0], envs[0].tools) if prompts is None else (list(prompts[g]), [])
        if len(prompt) >= budgets.max_trajectory_tokens:
            raise ValueError(f"max_trajectory_tokens={budgets.max_trajectory_tokens}: group {g}'s prompt alone has "
                             f"{len(prompt)} tokens; raise the budget or shorten the prompt")
        branches.append([_Branch(e, prompt, images, pad, length=len(prompt)) for e in envs])
    stop = [chat.tokenizer.eos_token]
    live = [(g, b) for g, bs in enumerate(branches) for b, br in enumerate(bs)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # an environment's set-up (a game loaded) runs while the first turn decodes
        prepared = [pool.submit(br.env.prepare) for bs in branches for br in bs if hasattr(br.env, "prepare")]
        for t in range(budgets.max_turns):
            requests = {}
            for g, b in live:
                br = branches[g][b]
                room = budgets.max_trajectory_tokens - br.length
                if room < 1:
                    br.end("max_trajectory_tokens", br.env.truncation_reward)
                    continue
                limit = min(budgets.max_tokens_per_turn, room)
                params = SamplingParams(max_tokens=limit, temperature=temperature, stop=stop,
                                        seed=seed + branch_request(t, g, 0 if t == 0 else b))
                if t == 0 and b == 0:  # the group's first turn: one request for all its branches
                    requests[(g, b)] = (sampler.sample(br.stream(pad), len(branches[g]), params), limit)
                elif t > 0:
                    requests[(g, b)] = (sampler.sample(br.stream(pad), 1, params), limit)
            sampled = {}
            for (g, b), (future, limit) in requests.items():
                for k, seq in enumerate(future.result().sequences):
                    sampled[(g, b + k)] = (seq, limit)
            turns = {gb: _sampled_turn(branches[gb[0]][gb[1]], *sampled[gb], chat, budgets) for gb in live if gb in sampled}
            acting = [gb for gb, turn in turns.items() if turn is not None]
            for done in prepared:
                done.result()
            prepared = []
            # environments (tools) step in threads: a slow tool holds up only its own branch's turn
            results = pool.map(lambda gb: branches[gb[0]][gb[1]].env.step({"role": "assistant", "content": turns[gb].text}),
                               acting)
            live = [(g, b) for (g, b), result in zip(acting, results)
                    if _extend(branches[g][b], turns[(g, b)], result, sampled[(g, b)][0].tokens, chat, budgets, t)]
            if not live:
                break
    return [[br.trajectory() for br in bs] for bs in branches]


def _sampled_turn(br: _Branch, seq, limit: int, chat: ChatTokens, budgets: Budgets) -> Turn | None:
    """Record a sampled turn; None when it ended the branch by running out of tokens mid-turn."""
    turn = Turn(list(seq.tokens), POLICY * len(seq.tokens), list(seq.logprobs), chat.strip_end(seq.tokens))
    br.turns.append(turn)
    br.length += len(seq.tokens)
    if seq.stop_reason == "length":
        br.end("turn_too_long" if limit == budgets.max_tokens_per_turn else "max_trajectory_tokens",
               br.env.truncation_reward)
        return None
    return turn


def _extend(br: _Branch, turn: Turn, result, sampled: Sequence[int], chat: ChatTokens, budgets: Budgets, t: int) -> bool:
    """Apply the environment's answer to a turn and append what follows it; False when the branch ended."""
    if not math.isfinite(result.reward):
        raise ValueError(f"{type(br.env).__name__}.step returned reward {result.reward}")
    turn.reward, turn.metrics = result.reward, result.metrics
    for k, v in result.metrics.items():
        br.metrics[k] = br.metrics.get(k, 0.0) + v
    br.reward += result.reward
    if result.done:
        br.end(result.stop_reason)
        return False
    calls = sum(m["role"] == "tool" for m in result.messages)
    if br.tool_calls + calls > budgets.max_tool_calls:
        br.end("max_tool_calls", br.env.truncation_reward)
        return False
    if t + 1 >= budgets.max_turns:
        br.end("max_turns", br.env.truncation_reward)
        return False
    tokens, source, texts, images = chat.after_turn(sampled, result.messages, budgets.max_observation_tokens)
    if br.length + len(tokens) >= budgets.max_trajectory_tokens:
        br.end("max_trajectory_tokens", br.env.truncation_reward)
        return False
    br.tool_calls += calls
    turn.tokens += tokens
    turn.source += source
    turn.logprobs += [0.0] * len(tokens)
    turn.observations = texts
    turn.images = images
    br.length += len(tokens)
    return True


def summarize(trajectories: Sequence[Trajectory], counters: Sequence[str] = (),
              stop_reasons: Sequence[str] = ()) -> dict[str, float]:
    """Means over episodes: reward, turns, each counted metric (tool_calls, correct, ...), how many
    episodes called no tool, the share of tool-call attempts that parsed (`valid_tool_call_rate`,
    left out when nothing was attempted), and the share of each stop reason (`stop/<reason>`).
    `counters` and `stop_reasons` name an environment's own metrics and reasons to report even when
    no episode had them (as 0)."""
    n = len(trajectories)
    # the tool counters and the stop reasons are always reported (0 when none happened), so a series
    # of evaluations has the same keys at every step
    keys = sorted({"tool_calls", "tool_errors", "malformed_calls", *counters} | {k for t in trajectories for k in t.metrics})
    # tool_calls counts parsed calls (a call to an unknown tool or with bad arguments included: it
    # parsed, and its error came back as an observation); an episode whose only call was malformed
    # counts as one without a tool call.
    out = {"reward": sum(t.reward for t in trajectories) / n,
           **{k: sum(t.metrics.get(k, 0.0) for t in trajectories) / n for k in keys},
           "no_tool_rate": sum(t.metrics.get("tool_calls", 0.0) == 0 for t in trajectories) / n,
           "truncated": sum(t.truncated for t in trajectories) / n}
    calls = sum(t.metrics.get("tool_calls", 0.0) for t in trajectories)
    attempts = calls + sum(t.metrics.get("malformed_calls", 0.0) for t in trajectories)
    if attempts:
        out["valid_tool_call_rate"] = calls / attempts
    for reason in sorted({"answered", "malformed_call", *TRUNCATIONS, *stop_reasons} | {t.stop_reason for t in trajectories}):
        out[f"stop/{reason}"] = sum(t.stop_reason == reason for t in trajectories) / n
    return out
