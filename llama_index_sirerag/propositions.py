"""Propositions and entities from chunks (§4.2, Figure 7) and their proposition aggregates.

Grouping follows the authors' notebooks: an entity's key is its lower-cased name (exact match),
propositions without entities are dropped, an entity's propositions are concatenated in corpus
order (so those of one document stay together and in order), a single-proposition aggregate
whose proposition also belongs to another aggregate is dropped, and identical aggregates are
kept once. With ``max_tokens`` an entity's propositions are cut, in corpus order, into aggregates of
at most that many tokens (a departure: the authors' aggregates are unbounded, but an entity such as
"United States" gathers hundreds of propositions in a large corpus — past what an embedder reads, so
the rest would never be embedded, and past a summary call).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from llama_index.core.llms.llm import LLM
from pydantic import BaseModel, Field, create_model

from llama_index_sirerag import prompts
from multihop_rag.indexing.text import count_tokens, written_as_name
from multihop_rag.llm.concurrency import CallLimit, map_bounded
from multihop_rag.llm.structured import StructuredStats, generate_json

__all__ = [
    "Proposition",
    "Aggregate",
    "extract_propositions",
    "filter_entities",
    "titled",
    "group_aggregates",
    "entity_key",
    "facts_schema",
    "HUB_FLOOR",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Proposition:
    """A factual statement from one chunk and the named entities it mentions."""

    id: str
    chunk_id: str
    order: tuple[int, int]
    """(chunk position in the corpus, position in the chunk): corpus order."""
    text: str
    entities: tuple[str, ...]


@dataclass
class Aggregate:
    """The propositions sharing one entity (or several, when their aggregates are identical)."""

    id: str
    entities: list[str]
    proposition_ids: list[str]
    text: str
    chunk_ids: list[str] = field(default_factory=list)


def entity_key(name: str) -> str:
    """Exact-match key of an entity: lower case, single spaces (the authors' ``ent.lower()``)."""
    return " ".join(name.lower().split())


@cache
def facts_schema(max_facts: int, max_entities: int) -> type[BaseModel]:
    """The JSON schema of Figure 7's output, with bounded arrays for constrained decoding."""
    fact = create_model(
        "Fact", fact=(str, ...), entities=(list[str], Field(default_factory=list, max_length=max_entities))
    )
    return create_model("Facts", facts=(list[fact], Field(default_factory=list, max_length=max_facts)))


def _proposition_id(chunk_id: str, position: int, text: str) -> str:
    return "prop-" + hashlib.sha1(f"{chunk_id}\n{position}\n{text}".encode()).hexdigest()[:16]


def _rewrite(llm: LLM, previous: str, paragraph: str) -> str:
    text = llm.complete(prompts.COREFERENCE.format(previous=previous or "(none)", paragraph=paragraph)).text.strip()
    return text or paragraph


def extract_propositions(
    llm: LLM,
    chunks: Sequence[tuple[str, str, str]],
    *,
    max_facts: int = 30,
    max_entities: int = 10,
    coreference_rewrite: bool = False,
    max_concurrency: int | CallLimit = 1,
    stats: StructuredStats | None = None,
    show_progress: bool = True,
    first_position: int = 0,
) -> tuple[list[Proposition], list[str]]:
    """Propositions of ``chunks`` (``(chunk_id, document_id, text)``) in corpus order, and skipped chunk ids;
    ``max_concurrency`` calls in flight. ``first_position``: the corpus position of the first chunk
    (chunks added later come after the others).

    A chunk whose answer never parses as JSON is skipped (warned, counted in ``stats``).
    """
    schema = facts_schema(max_facts, max_entities)
    previous_in_doc = {}
    for i, (chunk_id, doc_id, _) in enumerate(chunks):
        if i and chunks[i - 1][1] == doc_id:
            previous_in_doc[chunk_id] = chunks[i - 1][2]

    def one(item: tuple[int, tuple[str, str, str]]) -> Any:
        index, (chunk_id, _, text) = item
        if coreference_rewrite:
            text = _rewrite(llm, previous_in_doc.get(chunk_id, ""), text)
        return generate_json(
            llm, prompts.PROPOSITIONS.format(paragraph=text), schema, stats=stats, what=f"propositions of chunk {chunk_id}"
        )

    answers = map_bounded(one, list(enumerate(chunks)), max_concurrency=max_concurrency, desc="propositions",
                          show_progress=show_progress)
    propositions, skipped = [], []
    for index, ((chunk_id, _, _), answer) in enumerate(zip(chunks, answers, strict=True), start=first_position):
        if answer is None:
            skipped.append(chunk_id)
            continue
        for position, fact in enumerate(answer.facts):
            text = fact.fact.strip()
            if not text:
                continue
            entities = tuple(dict.fromkeys(e.strip() for e in fact.entities if e and e.strip()))
            propositions.append(
                Proposition(_proposition_id(chunk_id, position, text), chunk_id, (index, position), text, entities)
            )
    return propositions, skipped


def _parts(members: list[Proposition], max_tokens: int | None, tokens: dict[str, int]) -> list[list[Proposition]]:
    """``members`` cut in order into runs of at most ``max_tokens`` tokens (a longer proposition alone)."""
    if max_tokens is None:
        return [members]
    parts: list[list[Proposition]] = [[]]
    used = 0
    for prop in members:
        if prop.id not in tokens:
            tokens[prop.id] = count_tokens(prop.text) + 1
        size = tokens[prop.id]
        if parts[-1] and used + size > max_tokens:
            parts.append([])
            used = 0
        parts[-1].append(prop)
        used += size
    return parts


HUB_FLOOR = 5
"""Fewest chunks an entity must be mentioned in to count as a hub, whatever the share: in a small corpus a
bridge entity's few chunks are a large share."""


def filter_entities(
    propositions: Sequence[Proposition], *, drop_common_nouns: bool = False, max_chunk_share: float | None = None
) -> list[Proposition]:
    """``propositions`` with only the entities to group by (the propositions themselves all kept; one left
    without entities then joins no aggregate). ``drop_common_nouns``: drop a name written without a capital
    letter or a digit ("drummer"; §4.2 and Figure 3 want no common noun, asking the prompt for named
    entities). ``max_chunk_share``: drop a hub, an entity mentioned in more than this share of the chunks that
    have propositions (and in at least :data:`HUB_FLOOR`), whose aggregates gather unrelated propositions."""
    def named(name: str) -> bool:
        return not drop_common_nouns or written_as_name(name)

    hubs: set[str] = set()
    if max_chunk_share is not None:
        chunks_of: dict[str, set[str]] = {}
        for prop in propositions:
            for name in prop.entities:
                chunks_of.setdefault(entity_key(name), set()).add(prop.chunk_id)
        bound = max_chunk_share * len({p.chunk_id for p in propositions})
        hubs = {key for key, chunks in chunks_of.items() if len(chunks) > bound and len(chunks) >= HUB_FLOOR}
    kept = []
    for prop in propositions:
        entities = tuple(e for e in prop.entities if named(e) and entity_key(e) not in hubs)
        kept.append(prop if entities == prop.entities else dataclasses.replace(prop, entities=entities))
    return kept


def titled(propositions: Sequence[Proposition], title_of: Mapping[str, str]) -> list[Proposition]:
    """``propositions`` each starting with its chunk's title (``title_of``: chunk id to title), unless it
    mentions the title already or the chunk has none."""
    def with_title(prop: Proposition) -> Proposition:
        title = title_of.get(prop.chunk_id, "").strip()
        if not title or title.lower() in prop.text.lower():
            return prop
        return dataclasses.replace(prop, text=f"{title}: {prop.text}")

    return [with_title(p) for p in propositions]


def group_aggregates(propositions: Sequence[Proposition], max_tokens: int | None = None) -> list[Aggregate]:
    """Proposition aggregates: one per entity (or per ``max_tokens`` of its propositions), in order of first
    mention, after the singleton rule."""
    ordered = sorted(propositions, key=lambda p: p.order)
    by_entity: dict[str, list[Proposition]] = {}
    names: dict[str, str] = {}
    for prop in ordered:
        for name in prop.entities:
            key = entity_key(name)
            if not key:
                continue
            members = by_entity.setdefault(key, [])
            if not members or members[-1].id != prop.id:
                members.append(prop)
            names.setdefault(key, name.strip())
    memberships: dict[str, int] = {}
    for members in by_entity.values():
        for prop in members:
            memberships[prop.id] = memberships.get(prop.id, 0) + 1
    aggregates: dict[str, Aggregate] = {}
    tokens: dict[str, int] = {}
    for key, members in by_entity.items():
        if len(members) == 1 and memberships[members[0].id] > 1:
            continue  # its only proposition lives in another aggregate too
        for part in _parts(members, max_tokens, tokens):
            text = "\n".join(p.text for p in part)
            if text in aggregates:
                aggregates[text].entities.append(names[key])
                continue
            aggregates[text] = Aggregate(
                id="agg-" + hashlib.sha1(text.encode()).hexdigest()[:16],
                entities=[names[key]],
                proposition_ids=[p.id for p in part],
                text=text,
                chunk_ids=list(dict.fromkeys(p.chunk_id for p in part)),
            )
    return list(aggregates.values())
