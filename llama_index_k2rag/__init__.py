"""K²RAG — KeyKnowledgeRAG (Markondapatnaikuni et al., 2025) — as a LlamaIndex index and query engines.

    from llama_index_k2rag import K2RAGIndex
    index = K2RAGIndex.from_documents(docs, llm=llm, embed_model=embed)   # summarize, chunk, index, KG
    response = index.as_query_engine().query("…")       # Algorithm 2; response.metadata has the trace
    index.as_query_engine("hybrid")                      # or a naive pipeline of §3.2
"""

from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.hybrid import HybridRetriever, SparseStore, hybrid_score
from llama_index_k2rag.index import K2RAGIndex
from llama_index_k2rag.kg import KnowledgeGraph, PropertyGraphKG
from llama_index_k2rag.query_engine import PIPELINES, K2RAGQueryEngine, NaiveQueryEngine
from llama_index_k2rag.summarizers import LLMSummarizer, NoSummarizer, Seq2SeqSummarizer, Summarizer, make_summarizer

__all__ = [
    "K2RAGIndex",
    "K2RAGConfig",
    "HybridRetriever",
    "SparseStore",
    "hybrid_score",
    "KnowledgeGraph",
    "PropertyGraphKG",
    "K2RAGQueryEngine",
    "NaiveQueryEngine",
    "PIPELINES",
    "Summarizer",
    "LLMSummarizer",
    "Seq2SeqSummarizer",
    "NoSummarizer",
    "make_summarizer",
]
