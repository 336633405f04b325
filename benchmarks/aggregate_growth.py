"""How SiReRAG's aggregates (§4.2) grow with the corpus, without a model: the stand-in host's propositions (one per
sentence, its capitalised names as entities; what ``bench_scale``'s builds group) of the first PASSAGES of
``bench_scale``'s corpus, grouped as a build groups them (the default entity filter and ``max_aggregate_tokens``).

Prints, at each size, the propositions' tokens, the tokens of every entity's propositions (a proposition counted once
per entity it names), the share of those the singleton rule leaves out (an entity with one proposition that is in
another aggregate gets none), and the aggregates and their tokens, which the build embeds.

    .venv/bin/python benchmarks/aggregate_growth.py [--sizes 1000,6000]
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter

from bench_scale import CORPUS

from integrations_tests.openai_stub import stand_in_reply
from llama_index_sirerag import prompts
from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.propositions import Proposition, entity_key, facts_schema, filter_entities, group_aggregates
from multihop_rag.corpus import data_dir, load_documents
from multihop_rag.indexing.text import count_tokens


def stand_in_propositions(texts: list[str], config: SiReRAGConfig) -> list[Proposition]:
    """The propositions a build against the stand-in host extracts from ``texts`` (one chunk a passage)."""
    schema = facts_schema(config.max_propositions, config.max_entities)
    found = []
    for i, text in enumerate(texts):
        reply = schema.model_validate_json(stand_in_reply(prompts.PROPOSITIONS.format(paragraph=text), schema.model_json_schema()))
        found += [Proposition(f"{i}-{j}", str(i), (i, j), fact.fact, tuple(fact.entities)) for j, fact in enumerate(reply.facts)]
    return found


def growth(texts: list[str], config: SiReRAGConfig) -> dict[str, float]:
    propositions = filter_entities(stand_in_propositions(texts, config), drop_common_nouns=config.drop_common_noun_entities,
                                   max_chunk_share=config.max_entity_share)
    tokens = {p.id: count_tokens(p.text) for p in propositions}
    members: dict[str, set[str]] = {}
    for p in propositions:
        for name in p.entities:
            if key := entity_key(name):
                members.setdefault(key, set()).add(p.id)
    memberships = Counter(pid for ids in members.values() for pid in ids)
    left_out = sum(tokens[pid] for ids in members.values() if len(ids) == 1 for pid in ids if memberships[pid] > 1)
    aggregates = group_aggregates(propositions, config.max_aggregate_tokens)
    return {"proposition_tokens": sum(tokens.values()),
            "membership_tokens": sum(tokens[pid] for ids in members.values() for pid in ids),
            "left_out_tokens": left_out, "aggregates": len(aggregates),
            "aggregate_tokens": sum(count_tokens(a.text) for a in aggregates)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,6000")
    args = parser.parse_args()
    config = SiReRAGConfig()
    texts = [p.text for p in load_documents(data_dir() / CORPUS[0] / CORPUS[1])]
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = {size: growth(texts[:size], config) for size in sizes}
    print("| passages | propositions' tokens | entity memberships' tokens | left out by the singleton rule | aggregates "
          "| aggregates' tokens | a passage |\n|---|---|---|---|---|---|---|")
    for size, r in rows.items():
        print(f"| {size:,} | {r['proposition_tokens']:,} | {r['membership_tokens']:,} | "
              f"{r['left_out_tokens'] / r['membership_tokens']:.0%} | {r['aggregates']:,} | {r['aggregate_tokens']:,} | "
              f"{r['aggregate_tokens'] / size:.0f} |")
    a, b = rows[sizes[0]], rows[sizes[-1]]
    print(json.dumps({f"exponent of {k}": round(math.log(b[k] / a[k]) / math.log(sizes[-1] / sizes[0]), 3) for k in a}))


if __name__ == "__main__":
    main()
