"""Tools an agent calls: typed functions whose signature and docstring become the tool schema."""

from arl.tools.search import BM25Index, Passage, format_passages, search_tool

__all__ = ["BM25Index", "Passage", "format_passages", "search_tool"]
