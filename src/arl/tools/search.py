"""The Search-R1 chapter's tool: BM25 search over a local passage collection.

The reference lab searched the web (DeepSeek, Wikipedia, Zhihu APIs): results changed between runs,
keys ran out mid-training and every call cost money. Here the collection is a list of passages on
disk or generated in code, indexed with `bm25s` (sparse BM25, no model, no download), so a search is
deterministic, offline and takes well under a millisecond.

Scoring is Okapi BM25 (bm25s defaults k1=1.5, b=0.75) over `title + " " + text`, lowercased, words
of two or more characters, English stopwords removed, no stemmer (stemmers would need a download and
would mangle invented names). A passage's title therefore counts once more than its body: the page
about "Askel" outranks the many pages that merely mention Askel, a simple form of field weighting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from arl import extras

NO_RESULTS = "No results for this query."


@dataclass(frozen=True)
class Passage:
    id: str
    """Unique in its collection; questions name their supporting passages by it."""
    title: str
    text: str


def _bm25s():
    """The `bm25s` module (the `search` extra), imported when an index is first built, so that the rest of
    arl, and `Passage`, work without it."""
    return extras.require("search", "the BM25 search index (Search-R1's retriever)")


def _words(text: str) -> list[str]:
    return _bm25s().tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]


class BM25Index:
    """A BM25 index over a fixed list of passages; building one for a few hundred passages takes
    about 50 ms, so callers build it where they need it rather than caching it on disk."""

    def __init__(self, passages: Sequence[Passage]):
        if not passages:
            raise ValueError("passages is empty: give the index at least one Passage")
        ids = [p.id for p in passages]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"passage id {duplicate!r} occurs more than once; ids must be unique")
        self.passages = list(passages)
        corpus = [f"{p.title} {p.text}" for p in self.passages]
        bm25s = _bm25s()
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
        self._vocabulary = self._bm25.vocab_dict

    def search(self, query: str, k: int) -> list[Passage]:
        """The at most `k` passages with a positive score for `query`, best first; ties keep
        collection order, so the same query always gives the same list. A query with no indexed
        word (empty, stopwords only, punctuation, unknown words) gives []."""
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        words = [w for w in _words(query) if w in self._vocabulary]
        if not words:
            return []
        scores = self._bm25.get_scores(words)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.passages[i] for i in order if scores[i] > 0]


def format_passages(passages: Sequence[Passage]) -> str:
    """One line per passage, `Title: text`, or just the text when it already begins with the title
    (every generated encyclopedia passage does): the shortest form that still names each passage,
    since every observation token is paid again in each later turn."""
    if not passages:
        return NO_RESULTS
    return "\n".join(p.text if p.text.startswith(p.title) else f"{p.title}: {p.text}" for p in passages)


def search_tool(index: BM25Index, k: int = 2) -> Callable[[str], str]:
    """The `search` tool bound to `index`, returning the top `k` passages as text.

    The returned function's name, signature and docstring are what the model is told about the tool
    (`arl.tools.calls.tool_schema` reads them). A query that matches nothing returns `NO_RESULTS`,
    an observation the model can react to, rather than raising.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")

    def search(query: str) -> str:
        """Search the encyclopedia and return the best matching passages.

        Args:
            query: a name or a few words to look up, e.g. a person, town or company.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        return format_passages(index.search(query, k))

    return search
