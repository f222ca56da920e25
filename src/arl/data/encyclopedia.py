"""A generated encyclopedia of fictional entities: the mini task of the Search-R1 chapter.

People, towns, rivers, lakes and companies with invented names ("Kelvo Marden", "Dalven") and
random facts, one short passage per entity, plus distractor passages (songs, fairs, boats) that
mention the same names without answering any question. Questions ask one fact (one hop: "In which
town was Kelvo Marden born?") or chain two ("Which river flows through the town where Kelvo Marden
was born?"): the first search names a bridge entity, the second search is about it.

Why fictional entities: no model can know "Kelvo Marden", so the only route to an answer is the
search tool, and reward gained by RL measures searching and reading, not recall from pretraining.

Why two worlds: train and test questions come from two disjoint sub-worlds (different people,
towns, companies..., no relation crossing between them) that share one collection and one index.
A test question's facts therefore never appear in a train question or a train demonstration, so
nothing memorised in training answers a test question; the test passages still compete with the
train passages in every search, as in a real collection.

Sizes suit a 2M-5M-parameter model with a 2048-token context: passages of 13-34 tokens, names of
about three BPE tokens, single-word answers, a gold query that is just the entity's name, and about
400 passages. Deterministic like `arl.data.arithmetic`: one `random.Random(seed)`, no set iteration,
the test world drawn first.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from arl.data.qa import Question
from arl.tools.calls import format_tool_call
from arl.tools.search import Passage

# Invented names are an upper-case onset plus pieces that the tiny tokenizer holds as single tokens,
# so most names encode to 3 tokens (tests check the average) and a tiny model can copy them.
ONSETS = ("C", "D", "F", "H", "K", "L", "M", "N", "P", "S", "V", "W")
MIDDLES = ("al", "an", "ar", "el", "en", "er", "il", "in", "or", "ol", "on", "un", "ur", "orn",
           "ark", "ent", "ard", "ell", "ist", "ond", "is", "ek", "ad", "ag", "ab", "ob", "od", "ul", "um")
ENDINGS = ("ra", "ven", "ber", "ten", "mar", "vi", "son", "ti", "ma", "ri", "ro", "sa", "vel", "bel",
           "gan", "gen", "lo", "co", "mon", "ver")
FIRST_NAME_ENDINGS = ("a", "i", "o")
COMPANY_ENDINGS = ("co", "ix")
JOBS = ("baker", "farmer", "painter", "doctor", "teacher", "sailor", "builder", "miller", "singer",
        "writer", "tailor", "potter", "weaver", "hunter", "guard", "cook")
PRODUCTS = ("lamps", "boots", "bread", "paper", "glass", "rope", "clocks", "boats", "bells", "maps",
            "soap", "tools", "cloth", "chairs", "wheels", "candles")
TOWN_FEATURES = ("bridges", "markets", "gardens", "mills", "towers", "harbour", "walls", "orchards")
LAKE_KINDS = ("deep", "cold", "shallow", "quiet", "wide", "still")
DIRECTIONS = ("north", "south", "east", "west")
SEASONS = ("spring", "summer", "autumn", "winter")
YEARS = (1800, 1990)
FIRST_NAMES = 30
"""Size of the first-name pool shared by all people, so that several people share a first name and
a search for one full name also returns namesakes (a natural distractor)."""


@dataclass(frozen=True)
class WorldSize:
    people: int
    towns: int
    companies: int
    rivers: int
    lakes: int


TRAIN_WORLD = WorldSize(people=180, towns=36, companies=27, rivers=12, lakes=6)
TEST_WORLD = WorldSize(people=40, towns=10, companies=8, rivers=5, lakes=3)


class _Names:
    """Draws names never drawn before (by any world), so a name always means one entity."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def __call__(self, endings: tuple[str, ...] = ENDINGS) -> str:
        while True:
            name = self.rng.choice(ONSETS) + self.rng.choice(MIDDLES) + self.rng.choice(endings)
            if name not in self.used:
                self.used.add(name)
                return name


@dataclass
class _Person:
    name: str
    town: str
    company: str
    job: str
    year: int


@dataclass
class _Company:
    name: str
    town: str
    year: int
    product: str


def _spread(rng: random.Random, targets: list[str], n: int) -> list[str]:
    """`n` random picks from `targets` in which every target occurs at least once (when n allows)."""
    picks = targets[:n] + [rng.choice(targets) for _ in range(n - len(targets))]
    rng.shuffle(picks)
    return picks


def _world(rng: random.Random, names: _Names, first_names: list[str], size: WorldSize,
           split: str) -> tuple[list[Passage], list[Question]]:
    """One sub-world: its entities, their passages (and distractors), and every question about it."""
    lakes = [names() for _ in range(size.lakes)]
    rivers = dict(zip([names() for _ in range(size.rivers)], _spread(rng, lakes, size.rivers)))
    towns = dict(zip([names() for _ in range(size.towns)], _spread(rng, list(rivers), size.towns)))
    companies = [_Company(names(COMPANY_ENDINGS), town, rng.randint(*YEARS), rng.choice(PRODUCTS))
                 for town in _spread(rng, list(towns), size.companies)]
    by_company = {c.name: c for c in companies}
    people = [_Person(f"{rng.choice(first_names)} {names()}", town, company, rng.choice(JOBS), rng.randint(*YEARS))
              for town, company in zip(_spread(rng, list(towns), size.people),
                                       _spread(rng, list(by_company), size.people))]

    passages: list[Passage] = []
    doc_of: dict[str, str] = {}

    def add(title: str, text: str, entity: bool = True) -> None:
        passage = Passage(f"enc-{split}-{len(passages):04d}", title, text)
        passages.append(passage)
        if entity:
            doc_of[title] = passage.id

    for p in people:
        add(p.name, f"{p.name} was born in {p.town} in {p.year} and works as a {p.job} for {p.company}.")
    for town, river in towns.items():
        add(town, f"{town} is a town on the {river} river, known for its {rng.choice(TOWN_FEATURES)}.")
    for c in companies:
        add(c.name, f"{c.name} is a company in {c.town}, founded in {c.year}, that makes {c.product}.")
    for river, lake in rivers.items():
        add(river, f"{river} is a river that flows into Lake {lake}.")
    for lake in lakes:
        add(f"Lake {lake}", f"Lake {lake} is a {rng.choice(LAKE_KINDS)} lake in the {rng.choice(DIRECTIONS)}.")
    # Distractors: they share names with the entity passages, so a search returns them too, and they
    # carry a river, town or year that is not the answer (a policy must read the right passage).
    for p in rng.sample(people, size.people // 5):
        song = names()
        add(song, f"{song} is a song by {p.name} about the {rng.choice(list(rivers))} river.", entity=False)
    for town in rng.sample(list(towns), size.towns // 2):
        fair = f"{names()} Fair"
        add(fair, f"{fair} is held each {rng.choice(SEASONS)} in {town}.", entity=False)
    for c in rng.sample(companies, size.companies // 2):
        boat = names()
        add(boat, f"{boat} is a boat built by {c.name} in {rng.randint(*YEARS)}.", entity=False)

    def ask(text: str, answer: str | int, chain: tuple[str, ...], aliases: tuple[str, ...] = ()) -> Question:
        return Question("", text, (str(answer),) + aliases, len(chain), chain, tuple(doc_of[e] for e in chain))

    questions = []
    for p in people:
        c = by_company[p.company]
        questions += [
            ask(f"In which town was {p.name} born?", p.town, (p.name,)),
            ask(f"Which company does {p.name} work for?", p.company, (p.name,)),
            ask(f"What is the job of {p.name}?", p.job, (p.name,)),
            ask(f"In which year was {p.name} born?", p.year, (p.name,)),
            ask(f"Which river flows through the town where {p.name} was born?", towns[p.town], (p.name, p.town)),
            ask(f"In which town is the company {p.name} works for?", c.town, (p.name, c.name)),
            ask(f"In which year was the company {p.name} works for founded?", c.year, (p.name, c.name)),
            ask(f"What does the company {p.name} works for make?", c.product, (p.name, c.name)),
        ]
    for town, river in towns.items():
        questions += [
            ask(f"Which river flows through {town}?", river, (town,)),
            ask(f"Into which lake does the river through {town} flow?", rivers[river], (town, river),
                (f"Lake {rivers[river]}",)),
        ]
    for c in companies:
        questions += [
            ask(f"In which town is {c.name}?", c.town, (c.name,)),
            ask(f"In which year was {c.name} founded?", c.year, (c.name,)),
            ask(f"What does {c.name} make?", c.product, (c.name,)),
            ask(f"Which river flows through the town where {c.name} is?", towns[c.town], (c.name, c.town)),
        ]
    for river, lake in rivers.items():
        questions.append(ask(f"Into which lake does the {river} river flow?", lake, (river,), (f"Lake {lake}",)))
    return passages, questions


def _first(questions: list[Question], n: int, field: str, prefix: str) -> list[Question]:
    if not isinstance(n, int) or not 0 <= n <= len(questions):
        raise ValueError(f"{field} must be an integer from 0 to {len(questions)} (the questions this world has), got {n!r}")
    return [Question(f"{prefix}-{i:05d}", q.question, q.answers, q.hops, q.queries, q.support)
            for i, q in enumerate(questions[:n])]


def _worlds(seed: int) -> tuple[list[Passage], list[Question], list[Question], list[Question]]:
    """(training world's passages, its shuffled questions, held-out world's passages, its shuffled questions)."""
    rng = random.Random(seed)
    names = _Names(rng)
    first_names = [names(FIRST_NAME_ENDINGS) for _ in range(FIRST_NAMES)]
    test_passages, test_pool = _world(rng, names, first_names, TEST_WORLD, "test")
    train_passages, train_pool = _world(rng, names, first_names, TRAIN_WORLD, "train")
    rng.shuffle(test_pool)
    rng.shuffle(train_pool)
    return train_passages, train_pool, test_passages, test_pool


def make_encyclopedia(seed: int = 0, n_train: int = 1000,
                      n_test: int = 200) -> tuple[list[Passage], list[Question], list[Question]]:
    """`(passages, train, test)`: the whole collection (both worlds) and the first `n_train` / `n_test`
    questions of each world's shuffled question list. Fixed for a given seed on every machine; the
    collection does not depend on `n_train` or `n_test`, and a smaller split is a prefix of a larger one."""
    train_passages, train_pool, test_passages, test_pool = _worlds(seed)
    test = _first(test_pool, n_test, "n_test", f"enc-s{seed}-test")
    train = _first(train_pool, n_train, "n_train", f"enc-s{seed}-train")
    return train_passages + test_passages, train, test


def make_dev(seed: int = 0, n_dev: int = 100, n_test: int = 200) -> list[Question]:
    """`n_dev` development questions of encyclopedia `seed`: the last ones of the held-out world's
    shuffled list, which its first `n_test` (the test split) never reach. They ask about the held-out
    world, as the test split does, without adding a passage: the collection and every search stay as they are."""
    test_pool = _worlds(seed)[3]
    if not isinstance(n_dev, int) or n_dev < 0 or n_dev + n_test > len(test_pool):
        raise ValueError(f"n_dev={n_dev!r} with n_test={n_test}: the held-out world has {len(test_pool)} questions "
                         "for both; lower n_dev or n_test")
    return _first(test_pool[len(test_pool) - n_dev:], n_dev, "n_dev", f"enc-s{seed}-dev")


def demonstration(question: Question, search: Callable[[str], str]) -> list[dict]:
    """The gold continuation of the user turn, for the SFT cold start: per gold query an assistant
    turn holding only the search call and a tool turn with what `search` actually returns for it,
    then a final assistant turn `Answer: <canonical answer>`.

    The prompt before it (system and user turns) is the environment's, the same one RL samples
    from; `search` should be the tool the environment runs, so demonstrations show real results.
    """
    if not question.queries:
        raise ValueError(f"question {question.id!r} has no gold queries (real QA data); demonstrations "
                         "need generated questions")
    messages = []
    for query in question.queries:
        messages.append({"role": "assistant", "content": format_tool_call("search", {"query": query})})
        messages.append({"role": "tool", "content": search(query)})
    messages.append({"role": "assistant", "content": f"Answer: {question.answers[0]}"})
    return messages
