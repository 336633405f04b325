"""Comparisons in time decided by the years the reading gives (``compare_years``; ours, as ReSP's and HiRAG's).

"Which film came out first, X or Y?": the 1.5B, handed both years, names the later film as often as the earlier
one. :class:`YearsDecidedQueryEngine` asks the retrieved nodes for each option's date, a line each
(:data:`multihop_rag.time_order.YEARS`), and two different years answer the question without the reader's call;
any other question, an undecided one, or one whose dates are another's, a hop behind each option ("Which film has
the director born earlier, X or Y?", which HiRAG's reading of them lost), goes to the query engine's reader.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import CustomQueryEngine, RetrieverQueryEngine
from llama_index.core.schema import QueryBundle

from multihop_rag.llm.calls import Call, call
from multihop_rag.time_order import time_comparison

__all__ = ["YearsDecidedQueryEngine"]


class YearsDecidedQueryEngine(CustomQueryEngine):
    """``engine`` with its comparisons in time decided by the years its retrieved nodes give (``llm`` reads them)."""

    engine: RetrieverQueryEngine
    llm: LLM
    max_tokens: int = 64
    """The two lines' cap."""

    def custom_query(self, query_str: str) -> Any:
        bundle = QueryBundle(query_str)
        nodes = self.engine.retrieve(bundle)
        comparison = time_comparison(query_str)
        if comparison is not None and not comparison.of_another and nodes:
            reference = "\n\n".join(hit.node.get_content() for hit in nodes)
            reply = call(Call(self.llm, comparison.prompt(query_str, reference), max_tokens=self.max_tokens))
            if picked := comparison.decide(reply.text):
                return Response(picked[0], source_nodes=nodes, metadata={"decided_by": "years", "reasoning": picked[1]})
        return self.engine.synthesize(bundle, nodes)
