"""SiReRAG (Zhang et al., 2024): similarity and relatedness trees in one retrieval pool, for LlamaIndex.

    from llama_index_sirerag import SiReRAGIndex, SiReRAGConfig
    index = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=embed)
    index.as_retriever(similarity_top_k=20).retrieve("…"); index.as_query_engine().query("…")
    SiReRAGConfig(relatedness=False) builds plain RAPTOR, the paper's baseline.
"""

from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.index import SiReRAGIndex, SiReRAGStruct
from llama_index_sirerag.propositions import Aggregate, Proposition, group_aggregates
from llama_index_sirerag.retriever import SiReRAGRetriever
from llama_index_sirerag.tree import TreeNode

__all__ = [
    "SiReRAGIndex",
    "SiReRAGStruct",
    "SiReRAGRetriever",
    "SiReRAGConfig",
    "TreeNode",
    "Proposition",
    "Aggregate",
    "group_aggregates",
]
