"""GARLIC's prompts, verbatim from the paper's Appendix A (typos included: they are the prompt).

- :data:`SUMMARIZE` — Summary Graph Construction, Table 4 (A.1). The input Information Points
  (IPs) or chunks are listed one per line, each starting with ``* ``; the output IPs are called
  "summary points" so that the model does not confuse them with the input.
- :data:`FIRST_TURN` / :data:`SECOND_TURN` — Dynamic Graph Search, Table 5 (A.2): the first turn
  asks whether the visited nodes suffice ("Yes"/"No"); after the last "Yes" the second turn asks
  for the answer in the same conversation.
"""

SUMMARIZE_HEAD = "Summary the following information. Each segment is separated by a new line symbol.\n"
SUMMARIZE_TAIL = (
    "\nSplit your summary into different summary points according to the semantic information in these "
    "information points. It is not necessary to generate each summary point for each information point. "
    "Gather and organize information into summary points. In each summary point, try to avoid using pronouns "
    "like he/she/they and instead use full names. Generate in the format of:\n"
    "* summary point\n* summary point\n* summary point\n......\n"
    "Do not provide any explanation and start the summary directly."
)
SUMMARIZE = SUMMARIZE_HEAD + "{segments}" + SUMMARIZE_TAIL
"""Table 4; ``segments`` is one ``* <text>`` line per input node."""

BULLET_REMINDER = "\nStart every summary point on its own line with '* '."
"""Appended on the one retry when a reply holds no summary point (ours, not the paper's)."""

FIRST_TURN_HEAD = (
    "Can this question be answered by the following information? Response \"Yes\" or \"No\" in one word. "
    "Do not provide any explanation.\nQuestion:\n{question}\nInformation:\n"
)
FIRST_TURN = FIRST_TURN_HEAD + "{information}"
"""Table 5, first turn; ``information`` is one ``* <text>`` line per visited node, in visit order."""

SECOND_TURN = "Given the above information and question, answer the question as concisely as you can."
"""Table 5, second turn."""

SECOND_TURN_RETRY = "Question:\n{question}\nInformation:\n{information}" + SECOND_TURN + "{instruction}\nAnswer:"
"""Asked once, as a fresh single-turn prompt over the same information, when the second turn brings
back "Yes"/"No" (bare, or leading the reply: "Yes, the question can be answered by the information
provided.") to a question that is not a yes/no question; ours, not the paper's. Small models stay in
Yes/No mode inside the Table 5 conversation: Qwen2.5-0.5B answered "No", then "Yes" to a retry in
the same conversation, and "Rush" (the gold answer) to this prompt."""


SHORT_ANSWER = " Answer this question in as fewer number of words as possible."
"""Ours (``short_answer``): SiReRAG §5.4's reader instruction, which the other methods' readers carry, added to
each answer prompt above (Table 5 asks "as concisely as you can", and the 1.5B writes whole sentences)."""


def bullet(text: str) -> str:
    """One node as a line of a prompt: ``* <text>`` (inner newlines flattened, as in Tables 4–5)."""
    return "* " + " ".join(text.split()) + "\n"

INCOMPLETE_ANSWER = (
    "Question:\n{question}\nInformation:\n{information}The information above may be incomplete. "
    "Answer the question as concisely as you can from it.{instruction}\nAnswer:"
)
"""Ours: the answer prompt of a search that stopped without the LLM's "Yes" (the window was full,
``max_steps`` reached, or every node visited). Table 5's second turn would follow a "Yes" the model
never said."""
