"""Comparisons between two options decided by what a query engine's nodes give each (``compare_years``,
``compare_quantities``; ours, as ReSP's and HiRAG's), for any LlamaIndex query engine.

"Which film came out first, X or Y?": the 1.5B, handed both years, names the later film as often as the earlier
one. :class:`ComparisonsDecidedQueryEngine` asks the nodes for each option's date
(:data:`multihop_rag.time_order.YEARS`) or amount (:data:`multihop_rag.quantity_order.QUANTITIES`), a line each, and
two values that decide answer the question; any other question, an undecided one, or one whose dates are another's, a
hop behind each option ("Which film has the director born earlier, X or Y?", which HiRAG's reading of them lost), keeps
the engine's answer.

Over a :class:`~llama_index.core.query_engine.RetrieverQueryEngine` (SiReRAG, RAPTOR) the retrieved nodes are asked
first and a decided question makes no reader call. Over any other engine (GARLIC's search, which chooses its nodes as
it answers) the engine answers first and its response's source nodes are asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import RESPONSE_TYPE, Response
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import CustomQueryEngine, RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle

from multihop_rag.llm.calls import Call, Reply, acall, call
from multihop_rag.option_comparisons import Comparison, ComparisonKind, comparison_of

__all__ = ["ComparisonsDecidedQueryEngine"]


class ComparisonsDecidedQueryEngine(CustomQueryEngine):
    """``engine`` with its comparisons of the ``kinds`` decided by what its nodes give each option (``llm`` reads
    them). A decided response's ``metadata["decided_by"]`` names the kind; over an engine that answered first, the
    engine's metadata is kept and its answer is ``metadata["engine_answer"]``."""

    engine: BaseQueryEngine
    llm: LLM
    kinds: Sequence[ComparisonKind] = ("years", "quantities")
    max_tokens: int = 64
    """The two lines' cap."""

    def _asked(self, query_str: str, nodes: list[NodeWithScore]) -> tuple[ComparisonKind, Comparison, Call] | None:
        """The call asking ``nodes`` for each option's value, for the first of the ``kinds`` the question is."""
        if not nodes or (found := comparison_of(query_str, self.kinds)) is None:
            return None
        kind, comparison = found
        reference = "\n\n".join(hit.node.get_content() for hit in nodes)
        return kind, comparison, Call(self.llm, comparison.prompt(query_str, reference), max_tokens=self.max_tokens)

    @staticmethod
    def _decided(
        asked: tuple[ComparisonKind, Comparison, Call],
        reply: Reply,
        nodes: list[NodeWithScore],
        answered: RESPONSE_TYPE | None = None,
    ) -> Response | None:
        kind, comparison, _ = asked
        if not (picked := comparison.decide(reply.text)):
            return None
        metadata: dict[str, Any] = {}
        if answered is not None:
            metadata = {**(answered.metadata or {}), "engine_answer": str(answered)}
        return Response(
            picked[0], source_nodes=nodes, metadata={**metadata, "decided_by": kind, "reasoning": picked[1]}
        )

    def custom_query(self, query_str: str) -> Any:
        bundle = QueryBundle(query_str)
        if isinstance(self.engine, RetrieverQueryEngine):
            nodes = self.engine.retrieve(bundle)
            if (asked := self._asked(query_str, nodes)) and (decided := self._decided(asked, call(asked[2]), nodes)):
                return decided
            return self.engine.synthesize(bundle, nodes)
        answered = self.engine.query(bundle)
        nodes = answered.source_nodes
        if (asked := self._asked(query_str, nodes)) and (
            decided := self._decided(asked, call(asked[2]), nodes, answered)
        ):
            return decided
        return answered

    async def acustom_query(self, query_str: str) -> Any:
        bundle = QueryBundle(query_str)
        if isinstance(self.engine, RetrieverQueryEngine):
            nodes = await self.engine.aretrieve(bundle)
            if (asked := self._asked(query_str, nodes)) and (
                decided := self._decided(asked, await acall(asked[2]), nodes)
            ):
                return decided
            return await self.engine.asynthesize(bundle, nodes)
        answered = await self.engine.aquery(bundle)
        nodes = answered.source_nodes
        if (asked := self._asked(query_str, nodes)) and (
            decided := self._decided(asked, await acall(asked[2]), nodes, answered)
        ):
            return decided
        return answered
