"""The short-answer prompt every reader shares: naive RAG's (the wording of SiReRAG §5.4 / HippoRAG), and the
same request over a method's known information (its memory or sub-answers), with or without passages.

A small model answers a question best as naive RAG's reader is asked to, in a few words; a method that gathers
more evidence hands it over in the same prompt, so only the evidence differs from naive's."""

FROM_PASSAGES = """Passages:
{docs}

Using the passages, answer the question in as few words as possible.
Question: {question}
Answer: """
"""Naive RAG's reader: the passages alone."""

FROM_KNOWN = """Known information: {known}

Using the known information, answer the question in as few words as possible.
Question: {question}
Answer: """
"""A method's known information alone."""

FROM_PASSAGES_AND_KNOWN = """Passages:
{docs}

Known information: {known}

Using the passages and the known information, answer the question in as few words as possible.
Question: {question}
Answer: """
"""The passages first (a prompt cache reads them once for every question asked of them), then the known information."""


def short_answer_prompt(question: str, *, docs: str = "", known: str = "") -> str:
    """The short-answer prompt for ``question`` over whichever of ``docs`` (formatted passages) and ``known`` is
    given; with neither, naive RAG's with no passages."""
    if known and docs:
        return FROM_PASSAGES_AND_KNOWN.format(docs=docs, known=known, question=question)
    if known:
        return FROM_KNOWN.format(known=known, question=question)
    return FROM_PASSAGES.format(docs=docs, question=question)


STEP_FIRST = ('Reply in two lines: first "Step:" with what the question\'s description refers to, then "Answer:" with '
              'the answer.')
"""Asked of a reader that names what a question's description refers to before it answers (HiRAG's ``summary_style="step"``)."""


def step_answer_prompt(question: str, *, docs: str = "", known: str = "") -> str:
    """:func:`short_answer_prompt` asking for a "Step:" line first (:data:`STEP_FIRST`); the answer is the reply's
    "Answer:" line."""
    head = short_answer_prompt(question, docs=docs, known=known).rpartition("\nQuestion: ")[0]
    return f"{head} {STEP_FIRST}\nQuestion: {question}\nStep:"
