"""K²RAG's prompts (Markondapatnaikuni et al., 2025).

``ANSWER`` and ``SUB_QUESTION`` are the paper's two system prompts of §3.1.3, verbatim.
``SUMMARIZE`` is ours: the paper summarizes with a Longformer model (LED, §4.1), which takes no
prompt; when the LLM stands in for it, this asks for the same thing, a short faithful summary.
"""

from llama_index.core.prompts import PromptTemplate

ANSWER = PromptTemplate(
    "Additional Information: {context}\n\n"
    "Instruction: You are a smart LLM who gives an answer to the question in as little words as possible "
    "using the additional information provided above.\n\n"
    "Question: {question} Short Answer:"
)
"""Answer Generation System Prompt (§3.1.3), shared by K²RAG and the four naive pipelines (§3.2.2)."""

SUB_ANSWER = PromptTemplate(
    "Additional Information: {context}\n\n"
    "Instruction: You are a smart LLM who gives an answer to the question in as little words as possible "
    "using the additional information provided above. The question is one step towards answering: {main_question}\n\n"
    "Question: {question} Short Answer:"
)
"""Ours: the Answer Generation prompt for a sub-question, with the user's question in view (Algorithm 2, line 22)."""

SUB_QUESTION = PromptTemplate(
    "Instruction: Your task is to create a small question out of the below information.\n\n"
    "Information: {chunk}\n\n"
    "Answer:"
)
"""Question Generation System Prompt (§3.1.3): one sub-question per chunk of the KG results."""

SUMMARIZE = PromptTemplate(
    "Summarize the text below in a few sentences. Keep every name, date, number and place; "
    "add nothing that is not in the text.\n\n"
    "Text: {text}\n\n"
    "Summary:"
)
"""The LLM summarizer's prompt (the paper's LED summarizer needs none)."""

SUMMARIZE_WITHIN = PromptTemplate(
    "Summarize the text below in at most {words} words. Keep every name, date, number and place; "
    "add nothing that is not in the text.\n\n"
    "Text: {text}\n\n"
    "Summary:"
)
"""The LLM summarizer's prompt when a summary is asked for within a share of its text (``summary_share``)."""
