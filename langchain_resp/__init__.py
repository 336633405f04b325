"""ReSP — Retrieve, Summarize, Plan (Jiang et al., 2024) — as a LangGraph state machine.

    from langchain_resp import build_resp_graph
    graph = build_resp_graph(chat_model, retriever)          # any LangChain chat model / retriever
    state = graph.invoke({"question": "…"})                  # state["answer"], memories, trace
"""

from langchain_resp.graph import ROLES, LocalMemory, ReSPState, build_resp_graph, combined_memory

__all__ = ["build_resp_graph", "ReSPState", "LocalMemory", "combined_memory", "ROLES"]
