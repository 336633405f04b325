"""HiRAG — Hierarchical RAG with Rethink (Zhang et al., 2024) — as a LangGraph state machine.

Not the GraphRAG variant of the same name.

    from langgraph_hirag import HierarchicalCorpus, HiRAGConfig, build_hirag_graph
    corpus = HierarchicalCorpus.from_documents(docs, embed_model)   # titled documents
    graph = build_hirag_graph(chat_model, corpus)
    state = graph.invoke({"question": "…"})     # answer, sub_questions, sub_answers, trace
"""

from langgraph_hirag.config import HiRAGConfig
from langgraph_hirag.corpus import HierarchicalCorpus, TitledDocument
from langgraph_hirag.graph import ROLES, build_hirag_graph, build_hirag_retrieval_graph, hirag_state_graph
from langgraph_hirag.retrieval import RetrievalNodes, fallback_probability
from langgraph_hirag.retriever import HiRAGRetriever
from langgraph_hirag.state import Attempt, HiRAGInput, HiRAGOutput, HiRAGState, SubQuestionTrace

__all__ = [
    "HierarchicalCorpus",
    "TitledDocument",
    "HiRAGConfig",
    "build_hirag_graph",
    "hirag_state_graph",
    "build_hirag_retrieval_graph",
    "HiRAGRetriever",
    "HiRAGState",
    "HiRAGInput",
    "HiRAGOutput",
    "SubQuestionTrace",
    "Attempt",
    "ROLES",
    "fallback_probability",
    "RetrievalNodes",
]
