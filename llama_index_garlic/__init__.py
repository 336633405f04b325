"""GARLIC (LLM-Guided Dynamic Progress Control with Hierarchical Weighted Graph) for LlamaIndex.

    from llama_index_garlic import GarlicIndex
    index = GarlicIndex.from_documents(docs, llm=llm, embed_model=embed, attention_model="qwen2.5-coder-0.5b")
    response = index.as_query_engine(stop_patience=1).query("…")
    response.metadata["visited"], response.metadata["scoring"], index.graph.levels
"""

from llama_index_garlic.attention import AttentionModel, AttentionSession, TransformersAttention
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.graph import GraphNode, SummaryGraph
from llama_index_garlic.index import GarlicIndex
from llama_index_garlic.query_engine import GarlicQueryEngine, GarlicRetriever
from llama_index_garlic.search import SearchResult

__all__ = [
    "GarlicIndex",
    "GarlicConfig",
    "GarlicQueryEngine",
    "GarlicRetriever",
    "SummaryGraph",
    "GraphNode",
    "AttentionModel",
    "TransformersAttention",
    "AttentionSession",
    "SearchResult",
]
