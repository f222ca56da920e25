"""Batched sampling: every pending request decoded together, one prefill per prompt whose keys and
values all its samples share (decoder.py), finished rows dropped from the batch as they accumulate.
A model the fast decoder does not implement decodes through its own forward and KV cache instead
(forward_decoder.py), with the same batching, seeding and stopping.

Reproducibility: each request draws its random numbers from its own `torch.Generator`, seeded from
the request's seed by `generator_seed`, one uniform per sample per step, whatever else is in the batch,
so the same seed gives the same tokens whether a request decodes alone or beside others.

A prompt with images arrives with its ids expanded (each image as its `<|image_pad|>` positions), its
token types and its image chunks; its prefill runs from embeddings (decoder.py, `vision_prompt`), once
per request however many samples share it. Prompt logprobs at image positions are None: an image
position is not a token the model predicts.

Multi-turn rollouts send each turn's whole trajectory again as the next prompt. The sampler keeps the
keys/values of every sequence it decoded (prompt and sample, `SequenceCache`, bounded in bytes, least
recently used first out) and prefills only what a prompt adds to the longest cached sequence it starts
with (decoder.py, `extend`): the same weights and positions give the same keys, up to float rounding.

Reported `logprobs` are those of the distribution the token was drawn from before top-k / top-p
truncation: log_softmax(logits / temperature) (temperature 1 for greedy), so at temperature 1 they are
the trainer's logprobs of the same tokens.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
import concurrent.futures
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import torch

from ... import settings
from ...types import NonFiniteError, SampledSequence, SampleResponse, SamplingParams
from .decoder import Decoder, SuffixCache, unsupported, upcast
from .forward_decoder import ForwardDecoder
from .engine import ENGINE

MASK64 = (1 << 64) - 1
MAX_BATCH_ROWS = 256
BATCH_WINDOW_S = 0.002
PREFILL_TOKENS = 8192
CACHE_BYTES = 256 * 2**20
"""Keys/values the sampler keeps of the sequences it decoded, at most (`SequenceCache`)."""


@dataclass
class SampleRequest:
    prompt: list[int]
    num_samples: int
    params: SamplingParams
    include_prompt_logprobs: bool
    topk_prompt_logprobs: int
    return_text: bool
    types: list[int] | None = None
    """Per prompt position: 0 text, 1 image (None: all text)."""
    images: list = field(default_factory=list)
    """The prompt's `ImageChunk`s, in order."""
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)

    def logprob_or_none(self, position: int, value: float) -> float | None:
        """A prompt logprob as reported: None where the target position is an image position."""
        return None if self.types is not None and self.types[position] == 1 else value


class SequenceCache:
    """Keys/values ([H_kv, n, D] per layer) of token sequences decoded by one frozen model, least recently
    used out first once they hold more than `max_bytes`."""

    def __init__(self, max_bytes: int = CACHE_BYTES):
        self.max_bytes, self.bytes = max_bytes, 0
        self.entries: OrderedDict[tuple[int, ...], tuple[list, list]] = OrderedDict()

    def put(self, tokens: list[int], ks: list[torch.Tensor], vs: list[torch.Tensor]) -> None:
        key = tuple(tokens)
        size = sum(t.numel() * t.element_size() for t in (*ks, *vs))
        if len(key) < 2 or key in self.entries or size > self.max_bytes:
            return
        self.entries[key] = (ks, vs)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (old_k, old_v) = self.entries.popitem(last=False)
            self.bytes -= sum(t.numel() * t.element_size() for t in (*old_k, *old_v))

    def longest(self, prompt: list[int]) -> tuple[int, list, list] | None:
        """(n, keys, values) of the longest cached sequence that the prompt starts with and is longer than
        (a prompt needs at least one token run to give the next token's logits), or None."""
        best = None
        for key in self.entries:
            n = len(key)
            if n < len(prompt) and (best is None or n > len(best)) and prompt[n - 1] == key[-1] and tuple(prompt[:n]) == key:
                best = key
        if best is None:
            return None
        self.entries.move_to_end(best)
        return (len(best), *self.entries[best])


@dataclass
class _Active:
    """Decoding state of one request inside a batch."""

    req: SampleRequest
    generator: torch.Generator
    max_new: int
    stop_ids: set[int]
    stop_strings: list[str]
    tokens: list[list[int]]
    logprobs: list[list[float]]
    stop_reason: list[str | None]
    prompt_logprobs: list | None = None
    topk: list | None = None
    delta: int = 0
    """Shift of the positions after the prompt (multimodal RoPE; 0 for text)."""


class LocalSampler:
    """Serves `sample` / `compute_logprobs` for one frozen model; batches run on the engine thread."""

    def __init__(self, model, tokenizer, context_length: int, usage: dict, images=None):
        self.tokenizer = tokenizer
        self.images = images
        """The model's `arl.models.images.ImageEncoder` (None for a text-only model)."""
        self.context_length = context_length
        self.decoder = Decoder(model) if unsupported(model) is None else ForwardDecoder(model)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self._special_ids = {t.content: i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
        self._usage = usage
        self._pending: list[SampleRequest] = []
        self._pending_lock = threading.Lock()
        self._drain_scheduled = False
        self.cache = SequenceCache() if isinstance(self.decoder, Decoder) else None

    def submit(self, req: SampleRequest) -> concurrent.futures.Future:
        with self._pending_lock:
            self._pending.append(req)
            schedule = not self._drain_scheduled
            self._drain_scheduled = True
        if schedule:
            ENGINE.submit(self._drain)
        return req.future

    def _drain(self) -> None:
        """Decode what is pending as one batch. Requests fired together (asyncio.gather, a thread pool)
        arrive microseconds apart, so first wait until none has come for BATCH_WINDOW_S."""
        seen = -1
        while True:
            with self._pending_lock:
                now = len(self._pending)
            if now == seen:
                break
            seen = now
            time.sleep(BATCH_WINDOW_S)
        with self._pending_lock:
            batch, rows = [], 0
            while self._pending and (not batch or rows + self._pending[0].num_samples <= MAX_BATCH_ROWS):
                rows += self._pending[0].num_samples
                batch.append(self._pending.pop(0))
            more = bool(self._pending)
            self._drain_scheduled = more
        if more:
            ENGINE.submit(self._drain)
        try:
            with settings.autocast(self.decoder.device):
                self._run(batch)
        except BaseException as e:  # noqa: BLE001 - every waiter must hear about it
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)

    def _stops(self, params: SamplingParams) -> tuple[set[int], list[str]]:
        stop = params.stop
        if stop is None:
            eos = self.tokenizer.eos_token_id
            return ({eos} if eos is not None else set()), []
        if isinstance(stop, str):
            stop = [stop]
        ids: set[int] = set()
        strings: list[str] = []
        for s in stop:
            if isinstance(s, int):
                ids.add(s)
                continue
            special_id = self._special_ids.get(s)
            if special_id is not None:  # e.g. "<|im_end|>": only ever produced as its own token
                ids.add(special_id)
            else:
                strings.append(s)
        return ids, strings

    @torch.no_grad()
    def _run(self, batch: list[SampleRequest]) -> None:
        scores = [r for r in batch if r.num_samples == 0]
        if scores:
            self._score(scores)
        batch = [r for r in batch if r.num_samples > 0]
        if not batch:
            return
        actives: list[_Active] = []
        for req in batch:
            seed = req.params.seed if req.params.seed is not None else random.getrandbits(64)
            room = self.context_length - len(req.prompt)
            max_new = min(req.params.max_tokens or room, room)
            stop_ids, stop_strings = self._stops(req.params)
            n = req.num_samples
            actives.append(_Active(
                req=req, generator=torch.Generator().manual_seed(generator_seed(seed)), max_new=max_new,
                stop_ids=stop_ids, stop_strings=stop_strings,
                tokens=[[] for _ in range(n)], logprobs=[[] for _ in range(n)], stop_reason=[None] * n,
            ))

        prefilled = self._prefill(actives)
        n_rows = sum(r.num_samples for r in batch)
        prefix = self.decoder.build_prefix([(ks, vs) for _, ks, vs in prefilled],
                                           n_slots=max(r.num_samples for r in batch))
        suffix = self.decoder.new_suffix(n_rows, capacity=min(max(a.max_new for a in actives), 64))

        # row r of the batch is sample slot[r] of request owner[r]; finished rows are dropped from the
        # batch once they are a quarter of it (copying the suffix cache every time costs more)
        owner = torch.tensor([i for i, a in enumerate(actives) for _ in range(a.req.num_samples)])
        slot = torch.tensor([j for a in actives for j in range(a.req.num_samples)])
        flat_idx = torch.arange(n_rows)
        prompt_len_B = torch.tensor([len(a.req.prompt) + a.delta for a in actives for _ in range(a.req.num_samples)])
        finished_B = torch.zeros(n_rows, dtype=torch.bool)
        logits_BV = torch.cat([logits_1V.expand(a.req.num_samples, -1) for a, (logits_1V, _, _) in zip(actives, prefilled)])
        step = 0
        while True:
            next_B, logp_B = self._choose(actives, flat_idx, logits_BV)
            if not bool(torch.isfinite(logp_B).all()):  # a NaN or +inf logit makes its row's log_softmax NaN
                raise NonFiniteError("sampling: the model's logits are not finite (its weights overflowed: a learning "
                                     "rate far too large?); nothing was sampled; lower learning_rate and resume from "
                                     "the last checkpoint, or start again")
            for r, (i, j, tok, lp, fin) in enumerate(zip(owner.tolist(), slot.tolist(), next_B.tolist(),
                                                         logp_B.tolist(), finished_B.tolist())):
                if fin:
                    continue
                a = actives[i]
                a.tokens[j].append(tok)
                a.logprobs[j].append(lp)
                if tok in a.stop_ids or (a.stop_strings and self._hit_stop_string(a.tokens[j], a.stop_strings)):
                    a.stop_reason[j] = "stop"
                elif len(a.tokens[j]) >= a.max_new:
                    a.stop_reason[j] = "length"
                if a.stop_reason[j] is not None:
                    finished_B[r] = True
            if finished_B.all():
                self._remember(actives, prefilled, suffix, owner, slot, finished_B)
                break
            if finished_B.sum() * 4 >= len(finished_B):
                self._remember(actives, prefilled, suffix, owner, slot, finished_B)
                keep = (~finished_B).nonzero().squeeze(1)
                suffix.select_rows(keep)
                owner, slot, flat_idx, prompt_len_B = owner[keep], slot[keep], flat_idx[keep], prompt_len_B[keep]
                next_B, finished_B = next_B[keep], finished_B[keep]
            logits_BV = upcast(self.decoder.decode(next_B, prompt_len_B + step, prefix, suffix, step, owner, slot))
            step += 1

        for a in actives:
            seqs = [
                SampledSequence(stop_reason=a.stop_reason[j], tokens=a.tokens[j], logprobs=a.logprobs[j],
                                text=self.tokenizer.decode(a.tokens[j]) if a.req.return_text else None,
                                sequence_id=uuid.uuid4().hex)
                for j in range(a.req.num_samples)
            ]
            out_tokens = sum(len(s.tokens) for s in seqs)
            self._usage["sample_tokens"] += out_tokens
            a.req.future.set_result(SampleResponse(
                sequences=seqs, prompt_logprobs=a.prompt_logprobs, topk_prompt_logprobs=a.topk,
                input_tokens=len(a.req.prompt), output_tokens=out_tokens,
            ))

    def _remember(self, actives, prefilled, suffix: SuffixCache, owner_B, slot_B, rows_B) -> None:
        """Cache the keys/values of the finished rows `rows_B` (before they leave the batch): prompt and sampled
        tokens but the last, whose keys no decode step has computed."""
        if self.cache is None:
            return
        for r in rows_B.nonzero().squeeze(1).tolist():
            i, j = int(owner_B[r]), int(slot_B[r])
            a, (_, ks, vs) = actives[i], prefilled[i]
            n = len(a.tokens[j]) - 1
            if a.req.images or n < 0:
                continue
            self.cache.put(a.req.prompt + a.tokens[j][:-1], [torch.cat([k, s[r, :, :n]], dim=1) for k, s in zip(ks, suffix.k)],
                           [torch.cat([v, s[r, :, :n]], dim=1) for v, s in zip(vs, suffix.v)])

    def _extend_chunks(self, found: list[tuple[SampleRequest, tuple[int, list, list]]]):
        """`_prefill_chunks` for prompts that start with a cached sequence: only the rest is run."""
        self._usage["prefill_tokens"] += sum(len(r.prompt) - n for r, (n, _, _) in found)
        # the cost is the whole prompt: every tail token attends to the cached keys as well
        return [out for chunk in padded_chunks(found, lambda item: len(item[0].prompt), PREFILL_TOKENS)
                for out in self._extend_batch(chunk)]

    def _extend_batch(self, chunk):
        done = self.decoder.extend([(ks, vs) for _, (_, ks, vs) in chunk], [r.prompt[n:] for r, (n, _, _) in chunk])
        return [(logits, ks, vs, 0) for logits, ks, vs in done]

    def _score(self, reqs: list[SampleRequest]) -> None:
        """`compute_logprobs`: the logprob of every prompt token given the ones before it (first: None)."""
        for req, (logits_LV, _, _, _) in zip(reqs, self._prefill_chunks(reqs, True)):
            values = self._prompt_logprobs(upcast(logits_LV), req.prompt).tolist()
            req.future.set_result([None] + [req.logprob_or_none(i + 1, v) for i, v in enumerate(values)])

    def _prefill_chunks(self, reqs: list[SampleRequest], all_logits: bool):
        """Prefill in batches of at most PREFILL_TOKENS padded tokens, fewer when every position's
        logits are kept (bounding memory). Per request: (logits, keys, values, position delta)."""
        self._usage["prefill_tokens"] += sum(len(r.prompt) for r in reqs)
        budget = min(PREFILL_TOKENS, 2**26 // self.vocab_size) if all_logits else PREFILL_TOKENS
        return [out for chunk in padded_chunks(reqs, lambda r: len(r.prompt), budget)
                for out in self._prefill_batch(chunk, all_logits)]

    def _prefill_batch(self, reqs: list[SampleRequest], all_logits: bool):
        vision, deltas = [], []
        for r in reqs:
            if r.images:
                x_LC, positions_3L, delta = self.decoder.vision_prompt(r.prompt, r.types, *self.images.pixels(r.images))
                vision.append((x_LC, positions_3L))
                deltas.append(delta)
            else:
                vision.append(None)
                deltas.append(0)
        done = self.decoder.prefill([r.prompt for r in reqs], all_logits, vision)
        return [(logits, ks, vs, delta) for (logits, ks, vs), delta in zip(done, deltas)]

    @staticmethod
    def _prompt_logprobs(logits_LV: torch.Tensor, prompt: list[int]) -> torch.Tensor:
        targets_L = torch.tensor(prompt[1:])
        logits_LV = logits_LV[:-1]
        return logits_LV.gather(1, targets_L[:, None]).squeeze(1) - torch.logsumexp(logits_LV, dim=-1)

    def _prefill(self, actives: list[_Active]):
        """Run every request's prompt once: per request (logits [1, V] for the first new token, keys,
        values). Prompt logprobs, when asked for, are read off the same pass."""
        all_logits = any(a.req.include_prompt_logprobs or a.req.topk_prompt_logprobs for a in actives)
        found = [None if self.cache is None or all_logits or a.req.images else self.cache.longest(a.req.prompt)
                 for a in actives]
        cold = [a.req for a, f in zip(actives, found) if f is None]
        runs = iter(self._prefill_chunks(cold, all_logits))
        extended = iter(self._extend_chunks([(a.req, f) for a, f in zip(actives, found) if f is not None]))
        results = []
        for a, (logits, ks, vs, delta) in zip(actives, [next(runs) if f is None else next(extended) for f in found]):
            req = a.req
            a.delta = delta
            logits = upcast(logits)
            if req.include_prompt_logprobs:
                values = self._prompt_logprobs(logits, req.prompt).tolist()
                a.prompt_logprobs = [None] + [req.logprob_or_none(i + 1, v) for i, v in enumerate(values)]
            if req.topk_prompt_logprobs:
                logp_LV = torch.log_softmax(logits[:-1], dim=-1)
                vals, ids = logp_LV.topk(min(req.topk_prompt_logprobs, logp_LV.shape[-1]), dim=-1)
                a.topk = [None] + [list(zip(i, v)) for i, v in zip(ids.tolist(), vals.tolist())]
            results.append((logits[-1:], ks, vs))
        return results

    def _choose(self, actives, flat_idx_B, logits_BV):
        """Next token and its logprob for every row; `flat_idx_B` maps a row to its slot among all the
        requests' samples (request-major), which is where its uniform comes from."""
        # every request draws one uniform per sample every step, live or not: see the module doc
        u_B = torch.cat([torch.rand(a.req.num_samples, generator=a.generator) for a in actives])[flat_idx_B]
        keys = [(a.req.params.temperature, a.req.params.top_k, a.req.params.top_p) for a in actives]
        if len(set(keys)) == 1:
            return sample_from_logits(logits_BV, u_B, *keys[0])
        owner_B = torch.bucketize(flat_idx_B, torch.tensor(np.cumsum([a.req.num_samples for a in actives])), right=True)
        next_B = torch.empty(len(flat_idx_B), dtype=torch.long)
        logp_B = torch.empty(len(flat_idx_B))
        for key in set(keys):
            group = torch.tensor([i for i, k in enumerate(keys) if k == key])
            rows = torch.isin(owner_B, group).nonzero().squeeze(1)
            next_B[rows], logp_B[rows] = sample_from_logits(logits_BV[rows], u_B[rows], *key)
        return next_B, logp_B

    def _hit_stop_string(self, tokens: list[int], stops: list[str]) -> bool:
        longest = max(len(s) for s in stops)
        tail = self.tokenizer.decode(tokens[-(longest + 2):])
        return any(s in tail for s in stops)


def padded_chunks(items: list, length, budget: int):
    """`items` in order, in chunks whose padded size (the chunk's longest `length(item)` x its size) is at most
    `budget` tokens; an item longer than the budget is a chunk of its own."""
    chunk = []
    for item in items:
        if chunk and max(map(length, chunk + [item])) * (len(chunk) + 1) > budget:
            yield chunk
            chunk = []
        chunk.append(item)
    if chunk:
        yield chunk


def generator_seed(seed: int) -> int:
    """A request seed (any int, 64 bits used) as the 32 bits torch's CPU generator keeps: Mersenne
    Twister seeds from the low 32 bits only, so seeds that differ above them (the run seed and the
    step of `arl.rollout.seeds.request_seed` live there) would draw the same numbers. splitmix64's
    finaliser mixes every bit into the kept ones."""
    z = (seed + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 32) ^ (z & 0xFFFFFFFF)


def sample_from_logits(logits_BV: torch.Tensor, u_B: torch.Tensor, temperature: float, top_k: int, top_p: float):
    """Inverse-CDF sampling with the given uniforms; returns (tokens_B, logprobs_B).

    Greedy when temperature == 0. Logprobs come from log_softmax(logits / T) before truncation.
    """
    if temperature == 0:
        logp_BV = torch.log_softmax(logits_BV, dim=-1)
        tok_B = logits_BV.argmax(-1)
        return tok_B, logp_BV.gather(1, tok_B[:, None]).squeeze(1)
    logp_BV = torch.log_softmax(logits_BV / temperature, dim=-1)
    probs_BV = logp_BV.exp()
    if top_k > 0 and top_k < probs_BV.shape[-1]:
        kth = probs_BV.topk(top_k, dim=-1).values[:, -1:]
        probs_BV = torch.where(probs_BV >= kth, probs_BV, 0.0)
    if top_p < 1.0:
        sorted_p, order = probs_BV.sort(dim=-1, descending=True)
        mass_before = sorted_p.cumsum(-1) - sorted_p
        sorted_p = torch.where(mass_before < top_p * sorted_p.sum(-1, keepdim=True), sorted_p, 0.0)
        probs_BV = torch.zeros_like(probs_BV).scatter(1, order, sorted_p)
    cdf_BV = probs_BV.cumsum(-1)
    target_B1 = (u_B * cdf_BV[:, -1])[:, None]
    # right=True: the first slot whose cdf exceeds the target, never a zero-probability one
    tok_B = torch.searchsorted(cdf_BV, target_B1, right=True).squeeze(1).clamp(max=probs_BV.shape[-1] - 1)
    return tok_B, logp_BV.gather(1, tok_B[:, None]).squeeze(1)
