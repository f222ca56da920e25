"""BM25 search over a hand-made collection: ranking, determinism, no-result handling, the tool's schema."""

import pytest

from arl.tools.calls import tool_schema
from arl.tools import BM25Index, Passage, format_passages, search_tool
from arl.tools.search import NO_RESULTS

PASSAGES = [
    Passage("p0", "Kelvo Marden", "Kelvo Marden was born in Askel in 1874 and works as a baker for Dornix."),
    Passage("p1", "Askel", "Askel is a town on the Selva river, known for its bridges."),
    Passage("p2", "Dornix", "Dornix is a company in Askel, founded in 1921, that makes lamps."),
    Passage("p3", "Kelvo Sorn", "Kelvo Sorn was born in Dunmor in 1902 and works as a cook for Dornix."),
    Passage("p4", "Harbour notes", "Boats leave the harbour every morning."),
]


@pytest.fixture(scope="module")
def index():
    return BM25Index(PASSAGES)


def test_the_page_about_a_name_ranks_first(index):
    # "Askel" is in p0, p1 and p2; its own page wins because the title counts too.
    assert [p.id for p in index.search("Askel", k=3)] == ["p1", "p2", "p0"]
    # Both words of the full name beat a namesake who shares only the first name.
    assert [p.id for p in index.search("Kelvo Marden", k=2)] == ["p0", "p3"]
    assert [p.id for p in index.search("who founded DORNIX?", k=1)] == ["p2"]


def test_only_matching_passages_come_back(index):
    assert [p.id for p in index.search("Selva", k=5)] == ["p1"]
    assert len(index.search("Dornix", k=2)) == 2


@pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "Zyxwv qqq", "x"])
def test_queries_without_indexed_words_find_nothing(index, query):
    assert index.search(query, k=3) == []
    assert search_tool(index, k=3)(query) == NO_RESULTS


def test_tool_output_is_one_line_per_passage_with_its_title(index):
    search = search_tool(index, k=2)
    assert search("Kelvo Marden") == PASSAGES[0].text + "\n" + PASSAGES[3].text
    assert search("harbour boats") == "Harbour notes: Boats leave the harbour every morning."
    assert format_passages([]) == NO_RESULTS


def test_tool_schema_comes_from_the_bound_function(index):
    schema = tool_schema(search_tool(index, k=2))["function"]
    assert schema["name"] == "search"
    assert schema["description"] == "Search the encyclopedia and return the best matching passages."
    assert schema["parameters"]["required"] == ["query"]
    assert schema["parameters"]["properties"]["query"]["type"] == "string"


def test_bad_input_is_named(index):
    with pytest.raises(ValueError, match="passages is empty"):
        BM25Index([])
    with pytest.raises(ValueError, match="'p0' occurs more than once"):
        BM25Index(PASSAGES + [PASSAGES[0]])
    with pytest.raises(ValueError, match="k must be a positive integer"):
        search_tool(index, k=0)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        index.search("Askel", k=0)
    with pytest.raises(TypeError, match="query must be a string, got int"):
        search_tool(index)(42)
