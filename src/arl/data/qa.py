"""The record every search-QA task yields, and the loader for a real corpus and QA set on disk.

The generated encyclopedia (mini) and a real collection with NQ/HotpotQA questions (full) yield the
same `(passages, train, test)` triple, so the Search-R1 recipe switches between them with one call.

File formats (JSON Lines, UTF-8, one object per line):
- corpus: `{"id": "doc-1", "title": "Askel", "text": "Askel is a town on the Selva river."}`, or
  Search-R1's wiki-18 form `{"id": "0", "contents": ...}` whose contents are the title in double
  quotes, a newline, then the text, so that corpus file loads as it is;
- questions: `{"question": "...", "answers": ["...", ...]}`, optionally `"id"` and `"hops"`;
  `"answers"` may also be a single string, and `"golden_answers"` (Search-R1's data) is read too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arl.tools.search import BM25Index, Passage


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]
    """Every accepted answer; the first is canonical (what a demonstration answers)."""
    hops: int
    """Searches a gold solution needs (1 or 2); 0 when unknown (real data)."""
    queries: tuple[str, ...] = ()
    """The gold search queries in order, one per hop; the second names the bridge entity that the
    first search returns. Empty for real data, which has no gold queries."""
    support: tuple[str, ...] = ()
    """Id of the passage each gold query must retrieve, in the same order as `queries`."""


def support_hit_rate(questions: Sequence[Question], index: BM25Index, k: int) -> float:
    """Fraction of gold queries whose supporting passage is among the top `k` results: the ceiling a
    policy that issues exactly the gold queries can reach (the chapter's retrieval sanity check)."""
    pairs = [(query, doc) for q in questions for query, doc in zip(q.queries, q.support, strict=True)]
    if not pairs:
        raise ValueError("no question has gold queries; support_hit_rate needs generated questions")
    hits = sum(doc in [p.id for p in index.search(query, k)] for query, doc in pairs)
    return hits / len(pairs)


def _read_jsonl(path: str | Path, what: str, example: str) -> list[tuple[int, dict]]:
    """`(line number, object)` for each non-blank line, so that errors can name the line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} file {str(path)!r} not found: give a JSON Lines file with one "
                                f"object per line, e.g. {example}")
    rows = []
    with path.open(encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_number}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{line_number}: each line must be a JSON object, e.g. {example}")
            rows.append((line_number, row))
    if not rows:
        raise ValueError(f"{what} file {str(path)!r} is empty: it needs one object per line, e.g. {example}")
    return rows


CORPUS_EXAMPLE = '{"id": "doc-1", "title": "Askel", "text": "Askel is a town on the Selva river."}'
QUESTIONS_EXAMPLE = '{"question": "Which river flows through Askel?", "answers": ["Selva"]}'


def load_corpus_jsonl(path: str | Path) -> list[Passage]:
    """Passages from a corpus file; every line needs a string `id` and either string `title` and
    `text` or a string `contents` (wiki-18 form); ids unique."""
    passages, seen = [], set()
    for line_number, row in _read_jsonl(path, "corpus", CORPUS_EXAMPLE):
        if isinstance(row.get("contents"), str) and "title" not in row:
            title, _, text = row["contents"].partition("\n")
            row = {**row, "title": title.strip().strip('"'), "text": text.strip()}
        for field in ("id", "title", "text"):
            if not isinstance(row.get(field), str):
                raise ValueError(f"{path}:{line_number}: needs a string {field!r}, e.g. {CORPUS_EXAMPLE}")
        if row["id"] in seen:
            raise ValueError(f"{path}:{line_number}: repeats id {row['id']!r}; ids must be unique")
        seen.add(row["id"])
        passages.append(Passage(row["id"], row["title"], row["text"]))
    return passages


def load_questions_jsonl(path: str | Path) -> list[Question]:
    """Questions from a QA file (NQ/HotpotQA style); ids default to `<file stem>-<question index>`."""
    questions = []
    for index, (line_number, row) in enumerate(_read_jsonl(path, "questions", QUESTIONS_EXAMPLE)):
        answers = row.get("answers", row.get("golden_answers"))
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(row.get("question"), str) or not row["question"].strip():
            raise ValueError(f"{path}:{line_number}: needs a non-empty string 'question', e.g. {QUESTIONS_EXAMPLE}")
        if not answers or not all(isinstance(a, str) and a.strip() for a in answers):
            raise ValueError(f"{path}:{line_number}: needs 'answers': a list of non-empty strings, "
                             f"e.g. {QUESTIONS_EXAMPLE}")
        hops = row.get("hops", 0)
        if not isinstance(hops, int) or hops < 0:
            raise ValueError(f"{path}:{line_number}: has 'hops'={hops!r}; give a non-negative integer or leave it out")
        question_id = str(row.get("id", f"{Path(path).stem}-{index:05d}"))
        questions.append(Question(question_id, row["question"].strip(), tuple(answers), hops))
    return questions


def load_qa_jsonl(corpus_path: str | Path, train_path: str | Path,
                  test_path: str | Path) -> tuple[list[Passage], list[Question], list[Question]]:
    """`(passages, train, test)` from a real corpus and QA split files: the `full` preset's data."""
    return load_corpus_jsonl(corpus_path), load_questions_jsonl(train_path), load_questions_jsonl(test_path)
