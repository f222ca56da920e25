"""Typed-decision records: a short state (a support ticket, an insurance claim) and questions with
fixed options, generated from rules a tiny model can learn. The mini task of the Jev chapter.

A record is a state plus questions of three types: `choice` (options A, B, C...), `yes_no` and
`score` (1-5). Every answer follows from a few latent fields of the case by a fixed rule, so a model
that reads the state can get it right; the rules are written out in `_ticket` and `_claim`.

Splits are by case: every state is drawn once, its hash is checked against every state already
drawn, and a case lands in exactly one of train / dev / calibration / test, so no state text occurs in
two splits (`check_disjoint` checks it again). The `hard` split asks the same questions of longer
states built with two-step rules that training never shows (the customer corrects the topic halfway;
prior claims are split over two sentences and must be added up): the split where a model trained on
short cases is overconfident.

Deterministic: one `random.Random(f"decisions-{seed}")`, test-side splits drawn first, so train size
does not change them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TYPES = ("choice", "yes_no", "score")
LETTERS = "ABCDEFGH"
YES_NO = ("yes", "no")
SCORES = ("1", "2", "3", "4", "5")
SPLITS = ("train", "dev", "calibration", "test", "hard")


@dataclass(frozen=True)
class Question:
    name: str
    """Field name in the answer skeleton (`team`, `urgent`, `priority`)."""
    type: str
    """choice, yes_no or score."""
    text: str
    options: tuple[str, ...] = ()
    """A choice question's options, labelled A, B, C... in the prompt; empty for yes_no and score."""
    answer: str | None = None
    """The correct label: a letter (choice), yes / no, or 1-5; None for a record to be decided."""

    def labels(self) -> tuple[str, ...]:
        """The candidate labels of this question, in a fixed order."""
        if self.type == "choice":
            return tuple(LETTERS[: len(self.options)])
        return YES_NO if self.type == "yes_no" else SCORES


@dataclass(frozen=True)
class Record:
    id: str
    workflow: str
    state: str
    questions: tuple[Question, ...]

    @classmethod
    def from_json(cls, d: dict, where: str = "record") -> "Record":
        """A record from its JSON form, with an error naming the field when one is missing or wrong."""
        for key in ("state", "questions"):
            if key not in d:
                raise ValueError(f"{where}: missing field {key!r}; a record is "
                                 '{"state": "...", "questions": [{"name", "type", "text", "options"?}, ...]}')
        if not isinstance(d["questions"], list) or not d["questions"]:
            raise ValueError(f"{where}.questions: must be a non-empty list of questions")
        questions = []
        for i, q in enumerate(d["questions"]):
            at = f"{where}.questions[{i}]"
            missing = [k for k in ("name", "type", "text") if k not in q]
            if missing:
                raise ValueError(f"{at}: missing field(s) {missing}")
            question = Question(q["name"], q["type"], q["text"], tuple(q.get("options") or ()), q.get("answer"))
            validate_question(question, at)
            questions.append(question)
        return cls(str(d.get("id", "record")), str(d.get("workflow", "")), str(d["state"]), tuple(questions))


def validate_question(q: Question, where: str = "question") -> None:
    if q.type not in TYPES:
        raise ValueError(f"{where}.type={q.type!r}: must be one of {TYPES}")
    if q.type == "choice" and not 2 <= len(q.options) <= len(LETTERS):
        raise ValueError(f"{where}.options: a choice question needs 2-{len(LETTERS)} options, got {len(q.options)}")
    if q.type != "choice" and q.options:
        raise ValueError(f"{where}.options: only choice questions take options (a {q.type} question has fixed labels)")
    if q.answer is not None and q.answer not in q.labels():
        raise ValueError(f"{where}.answer={q.answer!r}: must be one of {q.labels()}")


def state_hash(state: str) -> str:
    """sha256 of the state with whitespace collapsed and lower-cased: two states that differ only in
    spacing or case count as the same case."""
    return hashlib.sha256(" ".join(state.lower().split()).encode()).hexdigest()


def check_disjoint(splits: dict[str, Sequence[Record]]) -> None:
    """Raise if a state (by `state_hash`) occurs twice, within a split or across splits."""
    seen: dict[str, str] = {}
    for split, records in splits.items():
        for r in records:
            h = state_hash(r.state)
            if h in seen:
                raise ValueError(f"duplicate state: record {r.id} of {split!r} has the same state as a record of "
                                 f"{seen[h]!r} ({r.state[:60]!r}...); splits must be disjoint by case")
            seen[h] = split


# -- the workflows ----------------------------------------------------------------------------------

NAMES = ("Mia", "Leo", "Alice", "Bob", "Emma", "Noah", "Grace", "Liam", "Maria", "Omar", "Priya", "Kenji",
         "Sofia", "Diego", "Zoe", "Sam", "Hannah", "Lucas", "Fatima", "Peter", "Ada", "Ivan", "Nora", "Tom")
TEAMS = ("billing", "technical", "account", "sales")
TOPIC_SENTENCES = {
    "billing": ("I was charged twice this month", "my invoice shows the wrong amount", "I want a refund for last month",
                "the payment failed but money left my card", "why is my bill higher than before"),
    "technical": ("the app crashes when I open it", "I get an error on the upload page", "the sync stopped working",
                  "the export button does nothing", "the page loads forever"),
    "account": ("I cannot reset my password", "please change the email on my account", "I want to close my account",
                "my login name is wrong", "add a second user to my profile"),
    "sales": ("I want to upgrade to a bigger plan", "can I get a quote for ten seats", "do you offer a discount for schools",
              "I would like a demo for my team", "what does the yearly plan cost"),
}
PLANS = ("free", "pro", "enterprise")
CHANNELS = ("email", "chat", "phone")
OUTAGE = ("Nothing works for our whole office.", "Everything is down since this morning.")
FILLER = ("I have been a customer for years.", "Thanks for your help.", "My colleague had the same question last week.",
          "I tried again after lunch.", "Please answer soon.", "The weather here is terrible today.")

ITEMS = ("phone", "laptop", "bike", "camera", "watch", "window", "car door", "roof")
EVENTS = ("was stolen", "was damaged in a storm", "broke after a fall", "was damaged by water")


def _ticket(rng: random.Random, hard: bool) -> tuple[str, tuple[Question, ...]]:
    """Rules: team = the topic of the complaint; urgent = an outage, or a technical issue on the
    enterprise plan; priority = 1 + plan index (free 0, pro 1, enterprise 2) + 2 if an outage.
    Hard: two filler sentences, and a first topic that the customer then corrects ("Actually, ...")."""
    topic, plan, channel = rng.choice(TEAMS), rng.choice(PLANS), rng.choice(CHANNELS)
    outage = rng.random() < 0.3
    name = rng.choice(NAMES)
    parts = [f"Ticket from {name} ({plan} plan, via {channel}):"]
    if hard:
        first = rng.choice([t for t in TEAMS if t != topic])
        parts += [rng.choice(TOPIC_SENTENCES[first]) + ".", rng.choice(FILLER),
                  "Actually, that is solved; the real problem:", rng.choice(TOPIC_SENTENCES[topic]) + "."]
        parts.insert(2, rng.choice(FILLER))
    else:
        parts.append(rng.choice(TOPIC_SENTENCES[topic]) + ".")
    if outage:
        parts.append(rng.choice(OUTAGE))
    urgent = outage or (plan == "enterprise" and topic == "technical")
    priority = 1 + PLANS.index(plan) + 2 * outage
    return " ".join(parts), (
        Question("team", "choice", "Which team handles it?", TEAMS, LETTERS[TEAMS.index(topic)]),
        Question("urgent", "yes_no", "Is it urgent?", answer="yes" if urgent else "no"),
        Question("priority", "score", "Priority (5 = highest)?", answer=str(priority)),
    )


def _claim(rng: random.Random, hard: bool) -> tuple[str, tuple[Question, ...]]:
    """Rules: risk = 1 + prior claims (0-2) + 1 if the amount has four digits + 1 if the receipt is
    missing, capped at 5; review = risk >= 4; route = auto-pay (risk 1-2), adjuster (3-4), fraud team (5).
    Hard: filler, and prior claims split over two sentences (this insurer and a partner) to be added."""
    prior = rng.choice((0, 0, 1, 2))
    large, missing = rng.random() < 0.5, rng.random() < 0.35
    amount = rng.randint(1000, 9000) if large else rng.randint(100, 900)
    name, item, event = rng.choice(NAMES), rng.choice(ITEMS), rng.choice(EVENTS)
    parts = [f"Claim by {name}: a {item} {event}, {amount} dollars."]
    if hard:
        here = rng.randint(0, prior)
        parts += [rng.choice(FILLER), f"Prior claims with us: {here}.", f"Prior claims at a partner insurer: {prior - here}."]
    else:
        parts.append(f"Prior claims: {prior}.")
    parts.append("Receipt missing." if missing else "Receipt attached.")
    risk = min(5, 1 + prior + large + missing)
    route = 0 if risk <= 2 else 1 if risk <= 4 else 2
    routes = ("auto-pay", "adjuster", "fraud team")
    return " ".join(parts), (
        Question("risk", "score", "Risk grade (5 = highest)?", answer=str(risk)),
        Question("review", "yes_no", "Must a person review it?", answer="yes" if risk >= 4 else "no"),
        Question("route", "choice", "Where does the claim go?", routes, LETTERS[route]),
    )


WORKFLOWS = {"ticket": _ticket, "claim": _claim}


def make_splits(seed: int = 0, n_train: int = 1200, n_dev: int = 100, n_calibration: int = 200, n_test: int = 200,
                n_hard: int = 200) -> dict[str, list[Record]]:
    """Records per split (SPLITS), each split alternating the workflows; states unique across all
    splits (drawn again on a repeat), then checked by `check_disjoint`."""
    rng = random.Random(f"decisions-{seed}")
    sizes = {"test": n_test, "hard": n_hard, "calibration": n_calibration, "dev": n_dev, "train": n_train}
    seen: set[str] = set()
    out: dict[str, list[Record]] = {}
    for split, n in sizes.items():
        records: list[Record] = []
        misses = 0
        while len(records) < n:
            workflow = tuple(WORKFLOWS)[len(records) % len(WORKFLOWS)]
            state, questions = WORKFLOWS[workflow](rng, hard=split == "hard")
            h = state_hash(state)
            if h in seen:
                misses += 1
                if misses > 100 * n:
                    raise ValueError(f"make_splits: cannot draw {n} unique {split!r} states; ask for fewer records")
                continue
            seen.add(h)
            records.append(Record(f"dec-s{seed}-{split}-{len(records):05d}", workflow, state, questions))
        out[split] = records
    out = {s: out[s] for s in SPLITS}
    check_disjoint(out)
    return out


def load_record(path: str | Path) -> Record:
    """One record from a JSON file (`Record.from_json`'s format; answers optional), for `arl decide`."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"record file {p} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: must hold one JSON object (a record), got {type(data).__name__}")
    return Record.from_json(data, where=str(p))
