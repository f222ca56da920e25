"""The fictional encyclopedia: fixed and disjoint splits, gold queries that BM25 answers, demonstrations
that a tiny tokenizer keeps short and the environment's parser and reward accept."""

import hashlib
import json
import re
import statistics

import pytest

from arl.data.encyclopedia import demonstration, make_encyclopedia
from arl.data.qa import Question, support_hit_rate
from arl.tools.calls import ToolCall, parse_tool_calls
from arl.models.tokenizer import train_tokenizer
from arl.rewards import grade_answer
from arl.tools import BM25Index, search_tool


@pytest.fixture(scope="module")
def world():
    return make_encyclopedia(seed=0)


@pytest.fixture(scope="module")
def index(world):
    return BM25Index(world[0])


def test_sizes_ids_and_pinned_content(world):
    passages, train, test = world
    assert (len(train), len(test)) == (1000, 200)
    assert 300 <= len(passages) <= 500
    assert len({p.id for p in passages}) == len(passages)
    assert len({q.id for q in train + test}) == 1200
    assert test[0].id == "enc-s0-test-00000"
    assert {q.hops for q in train} == {q.hops for q in test} == {1, 2}
    # Same seed, same task on every machine: pin the content, not just the shape.
    digest = hashlib.sha256(json.dumps([[p.title, p.text] for p in passages] + [
        [q.question, q.answers, q.queries, q.support] for q in train + test]).encode()).hexdigest()
    assert digest[:16] == "22f2cea295a26d0a"
    assert make_encyclopedia(seed=1)[0] != passages


def test_smaller_splits_are_prefixes_of_the_same_collection(world):
    passages, train, test = world
    small = make_encyclopedia(seed=0, n_train=10, n_test=5)
    assert small == (passages, train[:10], test[:5])


def test_train_and_test_worlds_share_no_fact(world):
    passages, train, test = world
    worlds = {split: [p for p in passages if p.id.startswith(f"enc-{split}-")] for split in ("train", "test")}
    assert len(worlds["train"]) + len(worlds["test"]) == len(passages)
    assert {d for q in train for d in q.support} <= {p.id for p in worlds["train"]}
    assert {d for q in test for d in q.support} <= {p.id for p in worlds["test"]}
    # No passage of one world names an entity of the other (relations never cross), and no train
    # question or answer names a test-world entity: nothing learnt in training answers a test question.
    for split, other in (("train", "test"), ("test", "train")):
        names = [p.title for p in worlds[other]]
        text = " ".join(p.text for p in worlds[split])
        assert not [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
    train_text = " ".join(q.question + " " + " ".join(q.answers) for q in train)
    assert not [p.title for p in worlds["test"] if re.search(rf"\b{re.escape(p.title)}\b", train_text)]


def test_every_gold_query_retrieves_its_passage_first(world, index):
    passages, train, test = world
    assert support_hit_rate(train, index, k=1) == 1.0
    assert support_hit_rate(test, index, k=1) == 1.0


def test_demonstrations_search_then_answer(world, index):
    passages, train, test = world
    search = search_tool(index, k=2)
    for q in train[:100] + test[:100]:
        messages = demonstration(q, search)
        assert [m["role"] for m in messages] == ["assistant", "tool"] * q.hops + ["assistant"]
        for call, query in zip(messages[0:-1:2], q.queries):
            assert parse_tool_calls(call["content"]) == [ToolCall("search", {"query": query})]
        observations = [m["content"] for m in messages[1::2]]
        if q.hops == 2:  # the second query is the bridge entity that the first search returned
            assert q.queries[1] in observations[0]
        assert q.answers[0] in observations[-1]
        assert grade_answer(messages[-1]["content"], q.answers).outcome == "correct"


def test_demonstration_needs_gold_queries():
    with pytest.raises(ValueError, match="no gold queries"):
        demonstration(Question("nq-1", "Who?", ("x",), 0), lambda query: "")


def test_sized_for_a_tiny_model(world):
    """Names about three BPE tokens, passages of 13-35 tokens, short answers."""
    passages, train, test = world
    tokenizer = train_tokenizer()
    name_tokens = [len(tokenizer.encode(" " + word)) for p in passages for word in p.title.split()
                   if word not in ("Lake", "Fair")]
    assert statistics.mean(name_tokens) <= 3.1 and max(name_tokens) <= 4
    passage_tokens = [len(tokenizer.encode(p.text)) for p in passages]
    assert max(passage_tokens) <= 40
    assert all(len(q.answers[0].split()) == 1 for q in train + test)


def test_split_sizes_are_checked_against_what_each_world_holds():
    """The largest split the error names is the whole world's question list: it can be had, one more cannot."""
    sizes = {}
    for field in ("n_train", "n_test"):
        with pytest.raises(ValueError, match=f"{field} must be an integer from 0 to") as e:
            make_encyclopedia(**{field: 100_000})
        sizes[field] = int(str(e.value).split(" from 0 to ")[1].split()[0])
    _, train, test = make_encyclopedia(n_train=sizes["n_train"], n_test=sizes["n_test"])
    assert (len(train), len(test)) == (sizes["n_train"], sizes["n_test"])
    assert len({q.question for q in train}) == len(train) and sizes["n_train"] > sizes["n_test"]  # the larger world
    with pytest.raises(ValueError, match="n_test must be an integer from 0 to"):
        make_encyclopedia(n_test=-1)
