"""ReSP prompts, verbatim from Table 1 of Jiang et al., "Retrieve, Summarize, Plan" (2024).

Placeholders: ``question`` (the overarching question), ``sub_question``, ``memory`` (the combined
global evidence and local pathway memory queues) and ``docs`` (one round's retrieved documents).
The Local Pathway prompt's "Known information" receives the retrieved documents: Algorithm 1
calls it as LLM_Sum([q, D_q], Prompt_local) and §4.1 says the summarizer answers the
sub-question "based on the retrieved documents".
"""

JUDGE = (
    "Judging based solely on the current known information and without allowing for inference, "
    "are you able to completely and accurately respond to the question {question}? \n"
    "Known information: {memory}. \n"
    'If you can, please reply with "Yes" directly; if you cannot and need more information, '
    'please reply with "No" directly.'
)
"""Reasoner, Judge (Table 1)."""

PLAN = (
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop "
    "reasoning across multiple documents. Please understand the information gap between the currently "
    "known information and the target problem.Your task is to generate one thought in the form of "
    "question for next retrieval step directly. DON'T generate the whole thoughts at once!\n "
    "DON'T generate thought which has been retrieved.\n "
    "[Known information]: {memory}\n[Target question]: {question}\n[You Thought]:"
)
"""Reasoner, Plan (Table 1; "You Thought" is the paper's spelling)."""

JUDGE_MEMORY_FIRST = (
    "Known information: {memory}\n"
    "Target question: {question}\n"
    "Judging based solely on the current known information and without allowing for inference, "
    "are you able to completely and accurately respond to the target question? \n"
    'If you can, please reply with "Yes" directly; if you cannot and need more information, '
    'please reply with "No" directly.'
)
"""Ours (``shared_prefixes="all"``): :data:`JUDGE` opening with the memory and the question, as :data:`PLAN_MEMORY_FIRST`
and :data:`REPLAN` do."""

PLAN_MEMORY_FIRST = (
    "Known information: {memory}\n"
    "Target question: {question}\n"
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop "
    "reasoning across multiple documents. Please understand the information gap between the currently "
    "known information and the target question. Your task is to generate one thought in the form of "
    "question for next retrieval step directly. DON'T generate the whole thoughts at once!\n "
    "DON'T generate thought which has been retrieved.\n[You Thought]:"
)
"""Ours (``shared_prefixes="all"``): :data:`PLAN` opening with the memory and the question."""

GLOBAL_EVIDENCE = (
    "Passages: {docs}\n"
    "Your job is to act as a professional writer. You will write a good-quality passage that can support "
    "the given prediction about the question only based on the information in the provided supporting "
    "passages. Now, let's start. After you write, please write [DONE] to indicate you are done. Do not "
    'write a prefix (e.g., "Response:") while writing a passage.\n'
    "Question:{question}\nPassage:"
)
"""Summarizer, Global Evidence (Table 1)."""

LOCAL_PATHWAY = (
    "Judging based solely on the current known information and without allowing for inference, are you "
    "able to respond completely and accurately to the question {sub_question}? \n"
    "Known information: {docs}. "
    'If yes, please reply with "Yes", followed by an accurate response to the question {sub_question}, '
    'without restating the question; if no, please reply with "No" directly.'
)
"""Summarizer, Local Pathway (Table 1)."""

LOCAL_PATHWAY_DOCUMENTS_FIRST = (
    "Passages: {docs}\n"
    "Judging based solely on the passages above and without allowing for inference, are you "
    "able to respond completely and accurately to the question {sub_question}? \n"
    'If yes, please reply with "Yes", followed by an accurate response to the question {sub_question}, '
    'without restating the question; if no, please reply with "No" directly.'
)
"""Ours (``shared_prefixes="documents"`` or ``"all"``): :data:`LOCAL_PATHWAY` opening with the documents, as :data:`GLOBAL_EVIDENCE` does."""

GENERATE = (
    "Answer the question based on the given reference.\n"
    "Only give me the answer and do not output any other words.\n"
    "The following are given reference: {memory}\n"
    "Question: {question}"
)
"""Generator, Response Generation (Table 1)."""

GENERATE_WITH_DOCUMENTS = (
    "Answer the question based on the given reference.\n"
    "Only give me the answer and do not output any other words.\n"
    "The following are given reference: {memory}\n"
    "[Retrieved documents]\n{docs}\n"
    "Question: {question}"
)
"""Ours: Table 1's generation prompt with the retrieved documents after the memory (``reader_tokens`` > 0)."""

ANSWER_WHAT_IS_ASKED = (
    "Answer with what the question asks for (a name, a title, a date, a place or a number), not with Yes or No and "
    "not with a heading of the reference."
)
"""Ours (``answer_check``): added to the question when the generator answered a heading of its reference or a bare
Yes/No to a question asking neither."""

REPLAN = (
    "Known information: {memory}\n"
    "Target question: {question}\n"
    'Your thought "{thought}" repeats "{earlier}", which has been searched already. To answer the target '
    "question, information about another person, place or work named in the known information is missing. "
    "Which one should be looked up next? Reply with its name only.\n"
    "Name:"
)
"""Ours, not the paper's: the one re-plan after a plan that repeats the question or an earlier
sub-question. It names the repetition and asks for the missing piece by name: asked for a new
question, Qwen2.5-0.5B wrote the target question again (or copied an example), while asked for the
name it gave the next hop's entity ("Charles B. Griffith" for the director of a film)."""

ENTITY_QUESTION = "What is known about {entity}?"
"""The sub-question made of the re-plan's name: it retrieves that entity's documents for the next round."""
