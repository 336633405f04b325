"""ReSP — Retrieve, Summarize, Plan (Jiang et al., 2024) — as a LangGraph state machine.

    from langchain_resp import build_resp_graph, ReSPConfig
    graph = build_resp_graph(chat_model, retriever)          # any LangChain chat model / retriever
    state = graph.invoke({"question": "…"})                  # state["answer"], memories, trace
    graph.invoke({"question": "…"}, context={"max_iterations": 2})   # one run with other knobs
"""

from langchain_resp.config import ReSPConfig
from langchain_resp.graph import ROLES, build_resp_graph, combined_memory, resp_state_graph
from langchain_resp.state import LocalMemory, ReSPInput, ReSPOutput, ReSPState

__all__ = [
    "build_resp_graph",
    "resp_state_graph",
    "ReSPConfig",
    "ReSPState",
    "ReSPInput",
    "ReSPOutput",
    "LocalMemory",
    "combined_memory",
    "ROLES",
]
