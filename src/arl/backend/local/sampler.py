"""Batched sampling: one prefill per prompt, its KV cache copied to all its samples, every pending
request decoded together in one left-padded batch.

Reproducibility: each request draws its random numbers from its own `torch.Generator(seed)`, one
uniform per sample per step, whatever else is in the batch, so the same seed gives the same tokens
whether a request decodes alone or beside others.

Reported `logprobs` are those of the distribution the token was drawn from before top-k / top-p
truncation: log_softmax(logits / temperature) (temperature 1 for greedy), so at temperature 1 they are
the trainer's logprobs of the same tokens.
"""

from __future__ import annotations

import queue
import random
import threading
import concurrent.futures
from dataclasses import dataclass, field

import torch

from ...types import SampledSequence, SampleResponse, SamplingParams
from .decoder import Decoder

MAX_BATCH_ROWS = 256


@dataclass
class SampleRequest:
    prompt: list[int]
    num_samples: int
    params: SamplingParams
    include_prompt_logprobs: bool
    topk_prompt_logprobs: int
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


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


class LocalSampler:
    """Serves `sample` / `compute_logprobs` for one frozen model from a background thread."""

    def __init__(self, model, tokenizer, context_length: int, compute_lock: threading.Lock, usage: dict):
        self.model = model
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.decoder = Decoder(model)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self._special_ids = {t.content: i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
        self._lock = compute_lock
        self._usage = usage
        self._queue: queue.Queue[SampleRequest] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()

    # -- public -------------------------------------------------------------------------------
    def submit(self, req: SampleRequest) -> concurrent.futures.Future:
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True, name="arl-sampler")
                self._thread.start()
        self._queue.put(req)
        return req.future

    # -- worker -------------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            batch = [self._queue.get()]
            rows = batch[0].num_samples
            while rows < MAX_BATCH_ROWS:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                batch.append(nxt)
                rows += nxt.num_samples
            try:
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
        for req in [r for r in batch if r.num_samples == 0]:
            self._score(req)
        batch = [r for r in batch if r.num_samples > 0]
        if not batch:
            return
        actives: list[_Active] = []
        for req in batch:
            seed = req.params.seed if req.params.seed is not None else random.getrandbits(63)
            room = self.context_length - len(req.prompt)
            max_new = min(req.params.max_tokens or room, room)
            stop_ids, stop_strings = self._stops(req.params)
            n = req.num_samples
            actives.append(_Active(
                req=req, generator=torch.Generator().manual_seed(seed), max_new=max_new,
                stop_ids=stop_ids, stop_strings=stop_strings,
                tokens=[[] for _ in range(n)], logprobs=[[] for _ in range(n)], stop_reason=[None] * n,
            ))

        prompt_max = max(len(r.prompt) for r in batch)
        total_len = prompt_max + max(a.max_new for a in actives)
        n_rows = sum(r.num_samples for r in batch)
        cache = self.decoder.new_cache(n_rows, total_len)
        first_logits = []
        row = 0
        for a in actives:
            logits_1V = self._prefill(a, cache, row, prompt_max)
            first_logits.append(logits_1V.expand(a.req.num_samples, -1))
            row += a.req.num_samples
        self._usage["prefill_tokens"] += sum(len(r.prompt) for r in batch)

        # row r of the batch is sample sample_idx[r] of request owner[r]; finished rows are dropped
        # from the batch once they are a quarter of it (copying the cache every time costs more)
        owner = torch.tensor([i for i, a in enumerate(actives) for _ in range(a.req.num_samples)])
        sample_idx = torch.tensor([j for a in actives for j in range(a.req.num_samples)])
        pad_B = torch.tensor([prompt_max - len(a.req.prompt) for a in actives for _ in range(a.req.num_samples)])
        col_L = torch.arange(total_len)
        finished_B = torch.zeros(n_rows, dtype=torch.bool)
        logits_BV = torch.cat(first_logits)
        step = 0
        while True:
            next_B, logp_B = self._choose(actives, owner, sample_idx, logits_BV)
            for r, (i, j, tok, lp, fin) in enumerate(zip(owner.tolist(), sample_idx.tolist(), next_B.tolist(),
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
            step += 1
            if finished_B.all():
                break
            if finished_B.sum() * 4 >= len(finished_B):
                keep = (~finished_B).nonzero().squeeze(1)
                cache.select_rows(keep)
                owner, sample_idx, pad_B = owner[keep], sample_idx[keep], pad_B[keep]
                next_B, finished_B = next_B[keep], finished_B[keep]
            col = prompt_max + step - 1
            positions_B1 = (col - pad_B)[:, None]
            mask_B1L = (col_L[None, :] >= pad_B[:, None])[:, None, :]
            with self._lock:
                logits_BV = self.decoder.forward(next_B[:, None], positions_B1, cache, col, mask_B1L)[:, -1].float()

        for a in actives:
            seqs = [
                SampledSequence(stop_reason=a.stop_reason[j], tokens=a.tokens[j], logprobs=a.logprobs[j],
                                text=self.tokenizer.decode(a.tokens[j]))
                for j in range(a.req.num_samples)
            ]
            out_tokens = sum(len(s.tokens) for s in seqs)
            self._usage["sample_tokens"] += out_tokens
            a.req.future.set_result(SampleResponse(
                sequences=seqs, prompt_logprobs=a.prompt_logprobs, topk_prompt_logprobs=a.topk,
                input_tokens=len(a.req.prompt), output_tokens=out_tokens,
            ))

    def _score(self, req: SampleRequest) -> None:
        """`compute_logprobs`: the logprob of every prompt token given the ones before it (first: None)."""
        L = len(req.prompt)
        with self._lock:
            logits_LV = self.decoder.forward(
                torch.tensor([req.prompt]), torch.arange(L)[None], self.decoder.new_cache(1, L), 0, None
            )[0, :-1].float()
        self._usage["prefill_tokens"] += L
        targets_L = torch.tensor(req.prompt[1:])
        logp_L = logits_LV.gather(1, targets_L[:, None]).squeeze(1) - torch.logsumexp(logits_LV, dim=-1)
        req.future.set_result([None] + logp_L.tolist())

    def _prefill(self, a: _Active, cache, row: int, prompt_max: int) -> torch.Tensor:
        """Run the prompt once, copy its keys/values into its rows (right-aligned at `prompt_max`), and
        return the logits [1, V] for the first new token; prompt logprobs are read off the same pass."""
        prompt = a.req.prompt
        L, n = len(prompt), a.req.num_samples
        one = self.decoder.new_cache(1, L)
        want_prompt_lp = a.req.include_prompt_logprobs or a.req.topk_prompt_logprobs > 0
        with self._lock:
            logits_1LV = self.decoder.forward(
                torch.tensor([prompt]), torch.arange(L)[None], one, 0, None, last_only=not want_prompt_lp
            ).float()
        for layer in range(len(cache.k)):
            cache.k[layer][row:row + n, :, prompt_max - L:prompt_max] = one.k[layer]
            cache.v[layer][row:row + n, :, prompt_max - L:prompt_max] = one.v[layer]
        if want_prompt_lp:
            logp_LV = torch.log_softmax(logits_1LV[0, :-1], dim=-1)
            targets = torch.tensor(prompt[1:])
            if a.req.include_prompt_logprobs:
                a.prompt_logprobs = [None] + logp_LV.gather(1, targets[:, None]).squeeze(1).tolist()
            if a.req.topk_prompt_logprobs:
                vals, ids = logp_LV.topk(min(a.req.topk_prompt_logprobs, logp_LV.shape[-1]), dim=-1)
                a.topk = [None] + [list(zip(i, v)) for i, v in zip(ids.tolist(), vals.tolist())]
        return logits_1LV[:, -1]

    def _choose(self, actives, owner, sample_idx, logits_BV):
        """Next token and its logprob for every live row."""
        u_B = torch.empty(len(owner))
        for i, a in enumerate(actives):
            u_n = torch.rand(a.req.num_samples, generator=a.generator)  # drawn every step: see module doc
            rows = (owner == i).nonzero().squeeze(1)
            if len(rows):
                u_B[rows] = u_n[sample_idx[rows]]
        params = [a.req.params for a in actives]
        groups = {(p.temperature, p.top_k, p.top_p) for p in params}
        next_B = torch.empty(len(owner), dtype=torch.long)
        logp_B = torch.empty(len(owner))
        for temperature, top_k, top_p in groups:
            idx = [i for i, p in enumerate(params) if (p.temperature, p.top_k, p.top_p) == (temperature, top_k, top_p)]
            rows = torch.isin(owner, torch.tensor(idx)).nonzero().squeeze(1) if len(groups) > 1 else torch.arange(len(owner))
            tok, lp = sample_from_logits(logits_BV[rows], u_B[rows], temperature, top_k, top_p)
            next_B[rows], logp_B[rows] = tok, lp
        return next_B, logp_B

    def _hit_stop_string(self, tokens: list[int], stops: list[str]) -> bool:
        longest = max(len(s) for s in stops)
        tail = self.tokenizer.decode(tokens[-(longest + 2):])
        return any(s in tail for s in stops)


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
