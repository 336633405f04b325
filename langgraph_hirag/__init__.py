"""HiRAG — Hierarchical RAG with Rethink (Zhang et al., 2024) — as a LangGraph state machine.

Not the GraphRAG variant of the same name.

    from langgraph_hirag import HierarchicalCorpus, build_hirag_graph
    corpus = HierarchicalCorpus.from_documents(docs, embed_model)   # titled documents
    graph = build_hirag_graph(chat_model, corpus)
    state = graph.invoke({"question": "…"})     # answer, sub_questions, sub_answers, trace
"""

from langgraph_hirag.corpus import HierarchicalCorpus, TitledDocument
from langgraph_hirag.graph import (
    Attempt,
    HiRAGState,
    SubQuestionTrace,
    build_hirag_graph,
    build_hirag_retrieval_graph,
    fallback_probability,
)
from langgraph_hirag.retriever import HiRAGRetriever

__all__ = [
    "HierarchicalCorpus",
    "TitledDocument",
    "build_hirag_graph",
    "build_hirag_retrieval_graph",
    "HiRAGRetriever",
    "HiRAGState",
    "SubQuestionTrace",
    "Attempt",
    "fallback_probability",
]
