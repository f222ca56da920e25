"""Fixed-option decisions in one forward pass: the record format, its training datum, and reading the
candidates' probabilities off the prompt logprobs (the Jev chapter and `arl decide`).

A record becomes one sequence: the chat prompt (the state and the questions, options labelled) and
then the assistant side, a skeleton with one marker token per question,

    team: @
    urgent: @
    priority: @

Training supervises only the position that predicts each marker, with the correct option's symbol
as the target (`marker_datum`). Reading needs no generation: one forward pass over prompt + skeleton
(`sample(max_tokens=1, topk_prompt_logprobs=K)`) gives the next-token distribution at every marker;
keep that question's candidate symbols and renormalise (`restricted_softmax`, with temperature T).
The markers stay in the input, never the answers, so no question sees another one's answer.

The skeleton is built piece by piece (text, then the marker's id) so that every marker is exactly one
token wherever it sits; `DecisionFormat.for_tokenizer` checks that the marker and every symbol are one
token of the model's vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .client import ServiceClient
from .data.decisions import LETTERS, SCORES, YES_NO, Question, Record
from .eval.calibration import restricted_softmax
from .rollout import marker_datum
from .types import Datum, ModelInput, SamplingParams

MARKER = "@"
"""The marker: one ordinary token that seldom occurs in a state (Jev uses the word `decision`)."""
SYMBOLS = {"yes": "Y", "no": "N"}
"""The token a label is written as, where it differs from the label (choice letters and scores are
themselves): "yes" and "no" are two tokens each in the tiny models' vocabulary."""


@dataclass(frozen=True)
class DecisionFormat:
    marker_id: int
    symbol_ids: dict[str, int]
    """label -> token id of its symbol, for every label of every question type."""

    @classmethod
    def for_tokenizer(cls, tokenizer, marker: str = MARKER) -> "DecisionFormat":
        def one_token(text: str, what: str) -> int:
            ids = tokenizer.encode(text, add_special_tokens=False)
            if len(ids) != 1:
                raise ValueError(f"{what} {text!r} is {len(ids)} tokens in this tokenizer; it must be exactly one "
                                 "(choose another marker / symbol)")
            return ids[0]

        labels = [*LETTERS, *YES_NO, *SCORES]
        return cls(one_token(marker, "marker"), {lb: one_token(SYMBOLS.get(lb, lb), "symbol") for lb in labels})

    def candidate_ids(self, q: Question) -> list[int]:
        return [self.symbol_ids[lb] for lb in q.labels()]


def prompt_messages(record: Record) -> list[dict]:
    """One user turn: the state, then one line per question: its name, its symbols (`A-D`, `Y/N`,
    `1-5`), its text and its labelled options."""
    lines = [record.state, "", "Questions:"]
    for q in record.questions:
        opts = " " + " ".join(f"{lb}) {o}" for lb, o in zip(q.labels(), q.options)) if q.options else ""
        symbols = [SYMBOLS.get(lb, lb) for lb in q.labels()]
        lines.append(f"{q.name} ({symbols[0]}-{symbols[-1]}): {q.text}{opts}" if q.type != "yes_no"
                     else f"{q.name} ({'/'.join(symbols)}): {q.text}{opts}")
    return [{"role": "user", "content": "\n".join(lines)}]


def encode_record(tokenizer, fmt: DecisionFormat, record: Record, written: Sequence[str] = ()) -> tuple[list[int], list[int]]:
    """(tokens of prompt + skeleton, the position of each question's marker in them). The first
    `len(written)` questions carry those labels' symbols in place of their markers: answers written out."""
    tokens = tokenizer.apply_chat_template(prompt_messages(record), add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    positions = []
    for i, q in enumerate(record.questions):
        tokens = tokens + tokenizer.encode(f"{q.name}: ", add_special_tokens=False)
        positions.append(len(tokens))
        tokens = tokens + [fmt.symbol_ids[written[i]] if i < len(written) else fmt.marker_id] \
            + tokenizer.encode("\n", add_special_tokens=False)
    return tokens, positions


def written_example(tokenizer, fmt: DecisionFormat, record: Record) -> tuple[list[int], list[int]]:
    """(prompt tokens, completion tokens ending with end-of-turn): the record's answers written out, one
    line per question, as ordinary SFT trains a model to write them (`sft_step`'s example)."""
    prompt = tokenizer.apply_chat_template(prompt_messages(record), add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    tokens, _ = encode_record(tokenizer, fmt, record, [q.answer for q in record.questions])
    return prompt, tokens[len(prompt):] + [tokenizer.eos_token_id]


def decision_datum(tokenizer, fmt: DecisionFormat, record: Record, weight: float = 1.0) -> Datum:
    """The record's `cross_entropy` datum: all its questions in one sequence, each answer's symbol the
    target at its marker, every other position weight 0."""
    if any(q.answer is None for q in record.questions):
        raise ValueError(f"record {record.id}: every question needs an answer to be trained on")
    tokens, positions = encode_record(tokenizer, fmt, record)
    return marker_datum(tokens, positions, [fmt.symbol_ids[q.answer] for q in record.questions], weight)


def candidate_logprobs(topk_V: Sequence[tuple[int, float]], candidate_ids: Sequence[int]) -> tuple[list[float], int]:
    """(each candidate's logprob from one position's top-K list, how many were not in it). A candidate
    outside the top K gets the smallest logprob listed, an upper bound on its own; exact when every
    candidate is listed (K = the vocabulary size always lists them)."""
    seen = dict(topk_V)
    floor = min(seen.values())
    return [seen.get(c, floor) for c in candidate_ids], sum(c not in seen for c in candidate_ids)


def read_logprobs(sampler, tokenizer, fmt: DecisionFormat, records: Sequence[Record],
                  topk: int = 64) -> tuple[list[list[list[float]]], float]:
    """(per record, per question: its candidate symbols' logprobs at its marker; the share of
    candidates that were outside the top K). One forward pass per record, all records submitted
    together so the engine batches them. `topk` = 0 asks for the whole vocabulary: exact, but the
    engine then returns V logprobs per position, which costs far more than the forward pass."""
    encoded = [encode_record(tokenizer, fmt, r) for r in records]
    topk_RL = _prompt_topk(sampler, [tokens for tokens, _ in encoded], topk or len(tokenizer))
    out, missing, total = [], 0, 0
    for record, (_, positions), topk_L in zip(records, encoded, topk_RL):
        per_question = []
        for q, p in zip(record.questions, positions):
            logp_C, n_missing = candidate_logprobs(topk_L[p], fmt.candidate_ids(q))
            per_question.append(logp_C)
            missing, total = missing + n_missing, total + len(logp_C)
        out.append(per_question)
    return out, missing / max(total, 1)


def read_written(sampler, tokenizer, fmt: DecisionFormat, records: Sequence[Record],
                 topk: int = 64) -> tuple[list[list[list[float]]], float]:
    """As `read_logprobs`, read the way a model that writes its answers answers: question i after its own
    answers (each earlier question's most likely candidate) written out in place of the markers before
    it, so a wrong early answer is in the context of the later ones. One forward pass per question."""
    out, written, missing, total = [[] for _ in records], [[] for _ in records], 0, 0
    for i in range(max(len(r.questions) for r in records)):
        todo = [j for j, r in enumerate(records) if i < len(r.questions)]
        encoded = [encode_record(tokenizer, fmt, records[j], written[j]) for j in todo]
        # the distribution at question i's marker sees only the tokens before it: the rest is not sent
        topk_RL = _prompt_topk(sampler, [tokens[:positions[i] + 1] for tokens, positions in encoded], topk or len(tokenizer))
        for j, (_, positions), topk_L in zip(todo, encoded, topk_RL):
            q = records[j].questions[i]
            logp_C, n_missing = candidate_logprobs(topk_L[positions[i]], fmt.candidate_ids(q))
            out[j].append(logp_C)
            written[j].append(q.labels()[int(np.argmax(logp_C))])
            missing, total = missing + n_missing, total + len(logp_C)
    return out, missing / max(total, 1)


def _prompt_topk(sampler, sequences: Sequence[list[int]], k: int) -> list[list]:
    """Each sequence's top-`k` prompt logprobs per position, all submitted together so the engine batches them."""
    params = SamplingParams(max_tokens=1, temperature=0.0, seed=0)
    futures = [sampler.sample(ModelInput.from_ints(tokens), 1, params, topk_prompt_logprobs=k, return_text=False)
               for tokens in sequences]
    return [f.result().topk_prompt_logprobs for f in futures]


@dataclass
class Decision:
    question: Question
    probs: dict[str, float]
    """label -> probability, over this question's candidates only."""

    @property
    def label(self) -> str:
        return max(self.probs, key=self.probs.get)

    @property
    def p_yes(self) -> float | None:
        return self.probs["yes"] if self.question.type == "yes_no" else None

    @property
    def expected_score(self) -> float | None:
        return sum(int(lb) * p for lb, p in self.probs.items()) if self.question.type == "score" else None

    def describe(self) -> str:
        """One line: the answer, the distribution and the type's summary (p(yes), expected score)."""
        q = self.question
        answer = f"{self.label}) {q.options[q.labels().index(self.label)]}" if q.type == "choice" else self.label
        dist = "  ".join(f"{lb}:{p:.3f}" for lb, p in self.probs.items())
        extra = (f"  p(yes)={self.p_yes:.3f}" if self.p_yes is not None else
                 f"  E[score]={self.expected_score:.2f}" if self.expected_score is not None else "")
        truth = f"  (gold {q.answer})" if q.answer is not None else ""
        return f"{q.name:12} {answer:24} [{dist}]{extra}{truth}"


def decide(sampler, tokenizer, records: Sequence[Record], temperature: float = 1.0, topk: int = 64) -> list[list[Decision]]:
    """Every question of every record as a `Decision` (probabilities at temperature T)."""
    fmt = DecisionFormat.for_tokenizer(tokenizer)
    out = []
    for record, logps in zip(records, read_logprobs(sampler, tokenizer, fmt, records, topk)[0]):
        out.append([Decision(q, dict(zip(q.labels(), (float(p) for p in restricted_softmax(lp, temperature)))))
                    for q, lp in zip(record.questions, logps)])
    return out


def answer_indices(records: Sequence[Record]) -> list[int]:
    """The index of each question's correct label among its candidates, flattened over records."""
    return [q.labels().index(q.answer) for r in records for q in r.questions]


def flatten(per_record: Sequence[Sequence[list[float]]]) -> list[np.ndarray]:
    """Per-record, per-question candidate logprobs as one flat list of arrays (one per question)."""
    return [np.asarray(lp) for rec in per_record for lp in rec]


def load_decider(path: str, temperature: float | None = None):
    """(sampling client, tokenizer, T) for a run folder of the Jev chapter (its final checkpoint and the
    temperature fitted on its calibration split) or a sampler checkpoint (T = 1 unless given)."""
    folder = Path(path)
    calibration = folder / "eval" / "calibration.json"
    if (folder / "config.json").is_file():
        if not calibration.is_file():
            raise FileNotFoundError(f"{folder} is a run folder without eval/calibration.json: the run has not "
                                    "finished (or is not a Jev run); pass a checkpoint path instead")
        fitted = json.loads(calibration.read_text(encoding="utf-8"))
        # the folder's own copy, so that a moved or copied run folder still works
        path = folder / "checkpoints" / "sampler_weights" / "final"
        temperature = fitted["temperature"] if temperature is None else temperature
    if temperature is not None and temperature <= 0:
        raise ValueError(f"--temperature {temperature}: must be > 0")
    sampler = ServiceClient().create_sampling_client(model_path=str(path))
    return sampler, sampler.get_tokenizer(), 1.0 if temperature is None else temperature
