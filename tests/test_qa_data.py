"""The real-data loader (the Search-R1 `full` preset) on tiny fixture files."""

import json

import pytest

from arl.data.qa import Question, load_qa_jsonl, support_hit_rate
from arl.tools import BM25Index, Passage


def write_jsonl(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {"id": "d1", "title": "Paris", "text": "Paris is the capital of France."},
        "",
        {"id": "d2", "title": "Rhine", "text": "The Rhine flows into the North Sea."},
    ])
    train = write_jsonl(tmp_path / "train.jsonl", [
        {"question": " What is the capital of France? ", "answers": ["Paris", "City of Paris"]},
        {"id": "hp-7", "question": "Where does the Rhine end?", "golden_answers": ["North Sea"], "hops": 2},
    ])
    test = write_jsonl(tmp_path / "test.jsonl", [{"question": "Capital of France?", "answers": "Paris"}])
    return corpus, train, test


def test_loads_corpus_and_questions(files):
    passages, train, test = load_qa_jsonl(*files)
    assert passages == [Passage("d1", "Paris", "Paris is the capital of France."),
                        Passage("d2", "Rhine", "The Rhine flows into the North Sea.")]
    assert train == [Question("train-00000", "What is the capital of France?", ("Paris", "City of Paris"), 0),
                     Question("hp-7", "Where does the Rhine end?", ("North Sea",), 2)]
    assert test == [Question("test-00000", "Capital of France?", ("Paris",), 0)]
    assert BM25Index(passages).search("capital of France", k=1)[0].id == "d1"


def test_reads_the_search_r1_corpus_form(tmp_path):
    corpus = write_jsonl(tmp_path / "wiki-18.jsonl", [{"id": "0", "contents": '"Aaron"\nAaron is a prophet.\nHe spoke.'}])
    passages, _, _ = load_qa_jsonl(corpus, *[write_jsonl(tmp_path / f"{n}.jsonl", [{"question": "Q?", "answers": ["A"]}])
                                            for n in ("train", "test")])
    assert passages == [Passage("0", "Aaron", "Aaron is a prophet.\nHe spoke.")]


def test_missing_file_names_the_path_and_the_format(files, tmp_path):
    corpus, train, test = files
    with pytest.raises(FileNotFoundError, match=r"corpus file '.*nowhere.jsonl' not found.*\"title\""):
        load_qa_jsonl(tmp_path / "nowhere.jsonl", train, test)
    with pytest.raises(FileNotFoundError, match=r"questions file '.*absent.jsonl' not found.*\"answers\""):
        load_qa_jsonl(corpus, train, tmp_path / "absent.jsonl")


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"id": "d1", "title": "Paris"}], "bad.jsonl:1: needs a string 'text'"),
        ([{"id": 3, "title": "Paris", "text": "x"}], "bad.jsonl:1: needs a string 'id'"),
        ([{"id": "d1", "title": "a", "text": "x"}, "", {"id": "d1", "title": "b", "text": "y"}],
         "bad.jsonl:3: repeats id 'd1'"),
        (["[1, 2]"], "bad.jsonl:1: each line must be a JSON object"),
        (["{not json"], "bad.jsonl:1: not valid JSON"),
        ([""], "is empty"),
    ],
)
def test_bad_corpus_rows_are_named(tmp_path, files, rows, message):
    with pytest.raises(ValueError, match=message):
        load_qa_jsonl(write_jsonl(tmp_path / "bad.jsonl", rows), files[1], files[2])


@pytest.mark.parametrize(
    "row, message",
    [
        ({"answers": ["x"]}, "needs a non-empty string 'question'"),
        ({"question": "Q?"}, "needs 'answers': a list of non-empty strings"),
        ({"question": "Q?", "answers": ["x", ""]}, "needs 'answers'"),
        ({"question": "Q?", "answers": ["x"], "hops": "two"}, "'hops'='two'"),
    ],
)
def test_bad_question_rows_are_named(tmp_path, files, row, message):
    with pytest.raises(ValueError, match=message):
        load_qa_jsonl(files[0], write_jsonl(tmp_path / "q.jsonl", [row]), files[2])


def test_hit_rate_needs_gold_queries(files):
    passages, train, _ = load_qa_jsonl(*files)
    with pytest.raises(ValueError, match="no question has gold queries"):
        support_hit_rate(train, BM25Index(passages), k=2)
