"""The graph's entities that the question names, found by their words, as a LlamaIndex property-graph sub-retriever.

LlamaIndex's default keyword step (``LLMSynonymRetriever``) asks the LLM for up to ten synonyms of the question and
looks each up as an entity name. The 1.5B often writes one name ten times ("Bulldog^Bulldog^…" for "…, the French
Bulldog or the American Bulldog?") or names of its own ("Harvard University^Stanford University^…"), so the entities
the question names are never looked up. Here they are found without a call: every run of the question's words that
is an entity's name (case and punctuation aside) and is written as a name in the question (a capital letter or a
digit: the 1.5B extracts common nouns too, "actor", "film"), the longest where names overlap, a lone stop word never.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from llama_index.core.graph_stores.types import KG_SOURCE_REL, EntityNode, PropertyGraphStore
from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from multihop_rag.indexing.text import written_as_name

__all__ = ["QuestionEntityRetriever", "named_entities"]

MAX_NAME_WORDS = 8
"""Longest entity name looked for, in words."""


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\w+", text))


def _key(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(word.lower() for word in words)


def named_entities(question: str, names: Iterable[str]) -> list[str]:
    """The ``names`` that ``question`` names, in the order it names them: a name's words appear in the question in a
    row (case aside), written there as a name is (a capital letter or a digit: "Film" of a title, not "film"); a
    name whose words lie inside a longer name's there is left out, as is a one-word stop word."""
    by_words: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        key = _key(_words(name))
        if 0 < len(key) <= MAX_NAME_WORDS and not (len(key) == 1 and key[0] in ENGLISH_STOP_WORDS):
            by_words.setdefault(key, []).append(name)
    asked = _words(question)
    spans = [(start, start + n) for start in range(len(asked)) for n in range(1, MAX_NAME_WORDS + 1)
             if start + n <= len(asked) and _key(asked[start:start + n]) in by_words
             and written_as_name(" ".join(asked[start:start + n]))]
    longest = [(a, b) for a, b in spans if not any(c <= a and b <= d and (c, d) != (a, b) for c, d in spans)]
    return list(dict.fromkeys(name for a, b in longest for name in by_words[_key(asked[a:b])]))


class QuestionEntityRetriever(BasePGRetriever):
    """The triples around the graph's entities that the question names (:func:`named_entities`); no LLM call."""

    def __init__(self, graph_store: PropertyGraphStore, *, limit: int = 30, path_depth: int = 1, **kwargs: Any) -> None:
        """``limit``, ``path_depth``: as ``LLMSynonymRetriever``'s (30 triples, one hop)."""
        self.store, self.limit, self.path_depth = graph_store, limit, path_depth
        super().__init__(graph_store=graph_store, **kwargs)

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        names = [node.id for node in self.store.get() if isinstance(node, EntityNode)]
        entities = self.store.get(ids=named_entities(query_bundle.query_str, names))
        if not entities:
            return []
        triples = self.store.get_rel_map(entities, depth=self.path_depth, limit=self.limit, ignore_rels=[KG_SOURCE_REL])
        return self._get_nodes_with_score(triples)

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_from_graph(query_bundle)
