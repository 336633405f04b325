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
from llama_index.core.schema import NodeWithScore, QueryBundle

from multihop_rag.llm.calls import Call, Reply, acall, call
from multihop_rag.time_order import TimeComparison, time_comparison

__all__ = ["YearsDecidedQueryEngine"]


class YearsDecidedQueryEngine(CustomQueryEngine):
    """``engine`` with its comparisons in time decided by the years its retrieved nodes give (``llm`` reads them)."""

    engine: RetrieverQueryEngine
    llm: LLM
    max_tokens: int = 64
    """The two lines' cap."""

    def _years_call(self, query_str: str, nodes: list[NodeWithScore]) -> tuple[TimeComparison, Call] | None:
        """The call asking ``nodes`` for each option's year, for a comparison in time of the options' own dates."""
        comparison = time_comparison(query_str)
        if comparison is None or comparison.of_another or not nodes:
            return None
        reference = "\n\n".join(hit.node.get_content() for hit in nodes)
        return comparison, Call(self.llm, comparison.prompt(query_str, reference), max_tokens=self.max_tokens)

    @staticmethod
    def _decided(comparison: TimeComparison, reply: Reply, nodes: list[NodeWithScore]) -> Response | None:
        if picked := comparison.decide(reply.text):
            return Response(picked[0], source_nodes=nodes, metadata={"decided_by": "years", "reasoning": picked[1]})
        return None

    def custom_query(self, query_str: str) -> Any:
        bundle = QueryBundle(query_str)
        nodes = self.engine.retrieve(bundle)
        if asked := self._years_call(query_str, nodes):
            if decided := self._decided(asked[0], call(asked[1]), nodes):
                return decided
        return self.engine.synthesize(bundle, nodes)

    async def acustom_query(self, query_str: str) -> Any:
        bundle = QueryBundle(query_str)
        nodes = await self.engine.aretrieve(bundle)
        if asked := self._years_call(query_str, nodes):
            if decided := self._decided(asked[0], await acall(asked[1]), nodes):
                return decided
        return await self.engine.asynthesize(bundle, nodes)
