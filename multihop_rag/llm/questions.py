"""Questions: the one a small model was asked to write, read out of its reply, and whether a question asks for Yes or No."""

from __future__ import annotations

import re

from multihop_rag.llm.calls import Reply

__all__ = ["asks_yes_no", "sub_question_of"]

_LABEL = re.compile(r"^\W*(\[?you(r)? thought\]?|thought|sub-?question|question)\W*:\W*", re.IGNORECASE)
"""A label before the question: "Thought: ", "Question: ", "**Question:** "."""

_QUESTION_START = re.compile(
    r"^((who|whom|whose|what|which|when|where|why|how|is|are|was|were|do|does|did|can|could|has|have|had)\b"
    r"|(in|on|at|from|for|to|of|by|with|after|before|during)\s+(which|what|whom|whose|how)\b)",
    re.IGNORECASE,
)


_YES_NO_QUESTION = re.compile(
    r"^\W*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might)\b", re.IGNORECASE
)


def asks_yes_no(question: str) -> bool:
    """Whether ``question`` asks for Yes or No: it opens with an auxiliary ("Is …", "Did …", "Were …")."""
    return bool(_YES_NO_QUESTION.match(question))


def _is_question(line: str) -> bool:
    return line.endswith("?") or bool(_QUESTION_START.match(line))


def sub_question_of(reply: Reply) -> str:
    """The reply's first line that asks something (ends in "?" or opens like a question), without its label. A reply
    that asks nothing ("Based on the information provided, X died in 1758."), or whose only line was cut at the token
    cap, holds no question: ""."""
    lines = [line.strip() for line in reply.text.strip().splitlines() if line.strip()]
    if reply.truncated and lines:
        lines.pop()  # the cut line
    asked = (_LABEL.sub("", line).strip().strip('"').strip() for line in lines)
    return next((line for line in asked if _is_question(line)), "")
