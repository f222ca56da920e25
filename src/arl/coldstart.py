"""SFT cold start: supervised steps on worked solutions that leave a tiny model partly competent, so
that RL has groups with both right and wrong answers to learn from. Cached by its settings: the first
run trains and saves a training state, every later run with the same settings loads it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import atomic, checkpoints
from . import settings as arl_settings
from .client import ServiceClient
from .data import Problem, format_privileged_prompt, format_prompt
from .models import model_dir
from .models.cache import read_manifest
from .rollout import sft_datum
from .models.images import IMAGE_PAD
from .rollout.multiturn import ChatTokens, demonstration_images, demonstration_stream
from .track import progress
from .types import AdamParams


@dataclass(frozen=True)
class ColdStart:
    model: str
    steps: int
    batch_size: int = 32
    learning_rate: float = 2e-3
    seed: int = 0
    data_seed: int = 0
    plain_fraction: float = 0.0
    """Share of training problems whose target states the final answer without the `\\boxed{}` the
    prompt asks for (as scraped data does now and then); drawn per problem from `data_seed`."""
    task: str = "arithmetic"
    """What `train` is (part of the cache key: another task must not reuse this cold start)."""
    privileged_fraction: float = 0.0
    """Share of training problems shown with their reference solution in the prompt
    (`format_privileged_prompt`) and the solution as the target: teaches a tiny model to read and
    follow a solution it is given, as OPSD's privileged teacher must; drawn per problem from `data_seed`."""
    init: str | None = None
    """A training state whose weights the SFT starts from (a fresh optimizer), e.g. another cold
    start; None = the base model."""

    def key(self) -> str:
        """Cache key: these settings and the base model's build manifest (a rebuilt model retrains)."""
        base = read_manifest(model_dir(self.model))
        unset = {"init": None, "privileged_fraction": 0.0}  # fields added later: unset, the key is as before
        fields = {k: v for k, v in asdict(self).items() if not (k in unset and v == unset[k])}
        dtype = arl_settings.get().dtype
        if dtype != "float32":  # float64 weights (smoke rows) are another cold start; float32 keys are as before
            fields["dtype"] = dtype
        return hashlib.sha256(json.dumps([fields, base], sort_keys=True).encode()).hexdigest()[:12]


def encode_chat(tokenizer, messages: list[dict]) -> list[int]:
    """Prompt tokens for `messages`, ending with the assistant generation header."""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)


def sft_targets(train: Sequence[Problem], plain_fraction: float, data_seed: int = 0) -> list[str]:
    """Each problem's SFT target: its worked solution, for a `plain_fraction` share (drawn per problem
    from `data_seed`) with the final `\\boxed{answer}` written as the plain answer."""
    rng = random.Random(f"plain-{data_seed}")
    return [_unboxed(p.solution) if rng.random() < plain_fraction else p.solution for p in train]


def privileged_mask(train: Sequence[Problem], privileged_fraction: float, data_seed: int = 0) -> list[bool]:
    """Which problems the cold start shows with their reference solution in the prompt (drawn per
    problem from `data_seed`, independently of the plain-answer draw)."""
    rng = random.Random(f"privileged-{data_seed}")
    return [rng.random() < privileged_fraction for _ in train]


def sft_examples(tokenizer, train: Sequence[Problem], targets: Sequence[str],
                 privileged: Sequence[bool] | None = None) -> list[tuple[list[int], list[int]]]:
    """(prompt tokens through the chat template, target tokens ending with end-of-turn) per problem; a
    `privileged` problem gets the prompt with its reference solution and that solution as its target."""
    privileged = privileged or [False] * len(train)
    out = []
    for p, t, priv in zip(train, targets, privileged, strict=True):
        prompt, target = (format_privileged_prompt(p), p.solution) if priv else (format_prompt(p), t)
        out.append((encode_chat(tokenizer, prompt), tokenizer.encode(target, add_special_tokens=False) + [tokenizer.eos_token_id]))
    return out


def sft_step(client, batch: Sequence[tuple], adam: AdamParams):
    """One token-mean cross-entropy step on (prompt, completion) pairs, or (prompt, completion, mask)
    triples whose mask picks the tokens to learn (a multi-turn demonstration's assistant tokens, not
    its observations), with the images inside the tokens fourth: (forward_backward, optim_step) futures."""
    masks = [example[2] if len(example) > 2 else [1] * len(example[1]) for example in batch]
    n_tokens = sum(map(sum, masks))
    # a demonstration with images inside its tokens carries them fourth (`demonstration_examples`)
    pad = client.get_tokenizer().convert_tokens_to_ids(IMAGE_PAD) if any(len(e) > 3 and e[3] for e in batch) else None
    datums = [sft_datum(example[0], example[1], [m / n_tokens for m in mask], example[3] if len(example) > 3 else (), pad)
              for example, mask in zip(batch, masks)]
    return client.forward_backward(datums, "cross_entropy"), client.optim_step(adam)


def _unboxed(solution: str) -> str:
    head, sep, tail = solution.rpartition("\\boxed{")
    if not sep:
        return solution
    inner, _, rest = tail.partition("}")
    return head + inner + rest


def content_digest(shown) -> str:
    """A short digest of what demonstrations show (a sample of them, the tool schema, ...), for a cold
    start's `task` name: a change to the prompt, the data or the result format then trains a new cold
    start instead of reusing a stale one."""
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:10]


def demonstration_examples(tokenizer, tool_schemas: bool, conversations: Sequence[tuple],
                           max_observation_tokens: int, processor=None) -> list[tuple]:
    """(prompt, tokens, mask) per multi-turn demonstration `(opening, tools, messages)`, laid out by
    `demonstration_stream` exactly as a rollout lays out its tokens, the mask picking the assistant's
    (policy) tokens: the examples `run_cold_start` takes for an agent chapter. With a vision model's
    `processor`, conversations may hold images: (prompt as a ModelInput, tokens, mask, the observation
    images inside the tokens), laid out by `demonstration_images`."""
    chat = ChatTokens(tokenizer, tool_schemas, processor)
    out = []
    for opening, tools, messages in conversations:
        if processor is None:
            prompt, tokens, source = demonstration_stream(chat, opening, tools, messages, max_observation_tokens)
            out.append((prompt, tokens, [int(s == "A") for s in source]))
        else:
            prompt, tokens, source, images = demonstration_images(chat, opening, tools, messages, max_observation_tokens)
            out.append((prompt, tokens, [int(s == "A") for s in source], images))
    return out


def run_cold_start(spec: ColdStart, train: Sequence, build_examples: Callable[[object], list[tuple]] | None = None) -> str:
    """Path of the training state after `spec.steps` SFT steps on `train` (trained once, then cached).

    `build_examples(tokenizer)` replaces the math task's (prompt, solution) pairs with a chapter's own
    examples, (prompt, completion[, mask]) as `sft_step` takes them; `spec.task` must then name
    them, since it is what tells their cache entry apart."""
    run_name = f"coldstart-{spec.key()}"
    uri = checkpoints.make_uri(run_name, "training_state", "final")
    lock_file = _cache_folder(run_name) / "training.lock"
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as lock:
        # one process trains a cold start at a time; the others (parallel arms of a comparison) wait, then load it
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            checkpoints.read_meta(uri)
            return uri
        except checkpoints.CheckpointNotFoundError:
            pass
        _train_cold_start(spec, run_name, train, build_examples)
    return uri


def _cache_folder(run_name: str) -> Path:
    """The cached cold start's folder: its training state, its lock and the record of its training time."""
    return checkpoints.resolve(checkpoints.make_uri(run_name, "training_state", "final")).parent.parent


def training_seconds(spec: ColdStart) -> float | None:
    """Wall seconds the cached cold start's SFT steps took when it was trained (a teacher's cost in a
    comparison's compute ledger); None for one trained before the time was recorded."""
    try:
        return float(json.loads((_cache_folder(f"coldstart-{spec.key()}") / "training.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return None


def _train_cold_start(spec: ColdStart, run_name: str, train: Sequence, build_examples) -> None:
    t0 = time.perf_counter()
    service = ServiceClient(run_name=run_name)
    if spec.init is None:
        client = service.create_full_training_client(spec.model, seed=spec.seed)
    else:
        client = service.create_training_client_from_state(spec.init)
    tok = client.get_tokenizer()
    if build_examples is None:
        examples = sft_examples(tok, train, sft_targets(train, spec.plain_fraction, spec.data_seed),
                                privileged_mask(train, spec.privileged_fraction, spec.data_seed))
    else:
        examples = build_examples(tok)
    rng = random.Random(spec.data_seed)
    adam = AdamParams(learning_rate=spec.learning_rate, weight_decay=0.0, grad_clip_norm=1.0)
    with progress(spec.steps, "SFT cold start") as bar:
        for _ in range(spec.steps):
            out, _ = sft_step(client, rng.sample(examples, min(spec.batch_size, len(examples))), adam)
            bar.update()
            bar.set_metrics({"loss": out.result().metrics["loss:sum"]})
    client.save_state("final", overwrite=True).result()  # rebuilding a cache entry that failed to load
    atomic.write_bytes(_cache_folder(run_name) / "training.json",
                       json.dumps({"steps": spec.steps, "seconds": time.perf_counter() - t0}).encode())
