"""HiRAG's prompts (Zhang et al., 2024).

The paper prints only the skeleton of the Decomposer prompt (§4.2: Background, Goal, Constraint,
Workflow, Example, Initialization, each with its first line) and describes the other modules in
prose (§4.3, §4.4, Algorithm 1). The sentences the paper quotes are kept verbatim below; the rest
follows the roles the paper and the authors' released code give each prompt (few-shot, one job
per prompt), written here with our own examples about made-up entities that appear in no bundled
corpus and no dataset (``EXAMPLE_ENTITIES``; a test checks both).
"""

_DECOMPOSER_OPENING = """## Background
- You are an expert at analyzing problems and are good at breaking down difficult problems into simple problems.
- A person facing a complex question is asking you for help. The question is hard to answer directly.

## Goal
Helping the user decompose the question and tell the user at the right time that the problem can be solved.

## Constraint
- You can only decompose the question, do not answer it directly.
- Ask only one simple question at a time, so that it is easy to answer.
- Decide whether to continue only from the user's answers, not from your own knowledge.

## Workflow
1. Analyse the original complex question and formulate a simple question based on that complex question.
2. Receive the user's answer to the simple question.
2.1 If the user could not answer the simple question, rephrase it as a different simple question.
2.2 If the user answered, look at all simple questions and answers so far.
2.2.1 If they are enough to answer the complex question, say "That's enough."
2.2.2 Otherwise, ask a new simple question.
3. Repeat step 2 until the complex question can be answered.

## Example
- Complex question: Where was the architect of the Quern Viaduct born?
  1st simple question: Who was the architect of the Quern Viaduct?
  1st answer: The architect of the Quern Viaduct was Odile Brask.
  2nd simple question: Where was Odile Brask born?
  2nd answer: Odile Brask was born in Vantmoor.
  Final output: That's enough.
- Complex question: Are the Pellory Library and the Marrowick Museum in the same country?
  1st simple question: In which country is the Pellory Library?
  1st answer: The Pellory Library is in Kovenholm.
  2nd simple question: In which country is the Marrowick Museum?
  2nd answer: The Marrowick Museum is in Drelsby.
  Final output: That's enough."""

_DECOMPOSER_INITIALIZATION = """

## Initialization
Reply with one simple question only. Now, a first simple question."""

DECOMPOSER = _DECOMPOSER_OPENING + _DECOMPOSER_INITIALIZATION
"""System prompt of the Decomposer (§4.2; the quoted lines are the paper's). It holds no question (that is
the first user turn's), so a prompt cache reads it once for every question. Its initialization asks
for a first simple question, as the paper's does ("Now, a first simple question."): "That's enough."
is offered only once sub-answers exist (:data:`NEXT_TURN`)."""

COMPARISON_EXAMPLE = """- Complex question: Who was born later, Odile Brask or Tamsin Vole?
  1st simple question: When was Odile Brask born?
  1st answer: Odile Brask was born on 4 March 1881.
  2nd simple question: When was Tamsin Vole born?
  2nd answer: Tamsin Vole was born on 9 July 1902.
  Final output: That's enough."""
"""Ours (``comparison_example``): an example of a question naming two options, asked option by option with the
question's own attribute."""

DECOMPOSER_FOR_OPTIONS = f"{_DECOMPOSER_OPENING}\n{COMPARISON_EXAMPLE}{_DECOMPOSER_INITIALIZATION}"
"""System prompt of the Decomposer for a question naming two options ("Who was born later, X or Y?"):
:data:`DECOMPOSER` with :data:`COMPARISON_EXAMPLE` last among its examples, so a prompt cache reuses the rest."""

DECOMPOSE_START = "Let's break down this complex question: {question}"
"""First user turn of the decomposition dialogue; each sub-answer is a later user turn."""

NEXT_TURN = (
    "{answer}\nIf the answers so far are enough to answer the complex question, say \"That's enough.\"; "
    "otherwise ask the next simple question."
)
"""A later user turn: the sub-answer, then the choice of workflow step 2.2."""

NO_ANSWER = "I could not find the answer to that question. Ask a different simple question."
"""The user turn after a sub-question whose retrieval gave up (workflow step 2.1: rephrase)."""

FIRST_QUESTION_AGAIN = "Do not answer yet and do not stop: ask the first simple question that helps to answer it."
"""Ours: asked once when the Decomposer stops before asking anything (small models say "That's
enough." on the first turn); a second refusal makes the question itself the first sub-question."""

NEXT_QUESTION_AGAIN = (
    "Do not stop yet: ask the next simple question the complex question still needs (for a comparison, the "
    "question about the option not asked about yet)."
)
"""Ours: asked once when the Decomposer says "That's enough." before ``min_subquestions`` sub-questions."""

NEXT_QUESTION_FRESH = (
    "A complex question needs several simple questions. Complex question: {question}\n"
    "Simple questions asked so far, with their answers:\n{answered}\n"
    "These answers are not enough yet. Ask the next simple question the complex question needs, about what the "
    "answers found (for a comparison, the option not asked about yet). Reply with the question only."
)
"""Ours (``fresh_next_question``): a single-turn prompt, asked when the Decomposer repeats a sub-question below
``min_subquestions``; ``answered`` is one "- sub-question answer" line per sub-question."""

NOT_THE_EXAMPLE = (
    "\n\nNote: the examples above are about other, made-up things. Answer only from the input and the "
    "known information of this question."
)
"""Ours: appended when an answer repeats an example's answer (a small model copying the examples)."""

ONE_OF_THE_OPTIONS = '{question}\nAnswer with one of the two, as written: "{first}" or "{second}".'
"""Ours (``answer_with_option``): the question of :data:`EXTRACT_ANSWER` when it names two options and the
extracted answer named neither."""

NOT_AN_EXAMPLE_QUESTION = (
    "The examples above are about other, made-up things. Ask a simple question about the people, places "
    "or things of this question."
)
"""Ours: asked once when a sub-question names an example's made-up entity (``EXAMPLE_ENTITIES``) that the
question does not; a second such sub-question makes the question itself the first sub-question (or ends
the decomposition after the first)."""

EXTRACT_ENTITY = """Extract the subject entity of the question: the name of the person, place, work or thing the question asks about. Reply with the name only.

Question: Who designed the Quern Viaduct?
Entity: Quern Viaduct

Question: Where was Odile Brask born?
Entity: Odile Brask

Question: Who is the director of film The Sallowmere Affair?
Entity: The Sallowmere Affair

Question: When did Tamsin Vole (painter) die?
Entity: Tamsin Vole (painter)

Question: {question}
Entity:"""
"""Entity name e = LLM(q) of eq. (3) (§4.3)."""

ANSWER_WITH_KNOWLEDGE = """Answer the question with the known information. First analyse the question and the known information, then give the answer in one sentence on a last line that starts with "Answer:". If the known information does not contain the answer, write "Answer: unknown".

Question: Who designed the Quern Viaduct?
Known information: The Quern Viaduct is a brick railway viaduct over the Lisk, completed in 1874 to a design by Odile Brask.
Analysis: The question asks for the designer. The known information says the viaduct was built to a design by Odile Brask.
Answer: The Quern Viaduct was designed by Odile Brask.

Question: {question}
Known information: {knowledge}
Analysis:"""
"""r = LLM(q, c_s, p*) of eq. (6): a sub-answer from the single retrieved chunk and the profile (§4.4)."""

CAN_ANSWER = """Based on the response and the question, tell me whether the response answers the question. Your answer must be yes or no.

Response: The nationality of Tamsin Vole is not given.
Question: What is the nationality of Tamsin Vole?
Output: no

Response: The Quern Viaduct was designed by Odile Brask.
Question: Who designed the Quern Viaduct?
Output: yes

Response: {response}
Question: {question}
Output:"""
"""The Filter's Verify step (§4.4): can the sub-question be solved with what was retrieved?"""

CAN_ANSWER_FROM = """Based on the known information, tell me whether the response answers the question and is supported by the known information. Your answer must be yes or no.

Known information: The Quern Viaduct crosses the Lisk. It was designed by Odile Brask in 1911.
Response: The Quern Viaduct was designed by Tamsin Vole.
Question: Who designed the Quern Viaduct?
Output: no

Known information: The Quern Viaduct crosses the Lisk. It was designed by Odile Brask in 1911.
Response: The Quern Viaduct was designed by Odile Brask.
Question: Who designed the Quern Viaduct?
Output: yes

Known information: {knowledge}
Response: {response}
Question: {question}
Output:"""
"""The Filter's Verify step grounded in the chunk (Algorithm 1, line 25 passes c_s; ``verify_reads_chunk``)."""

INTERNAL_ANSWER = """Answer the question from your own knowledge in one sentence. If you do not know, say "I don't know".

Question: {question}
Answer:"""
"""Internal knowledge, used with probability (t/m)² after the t-th failed rethink (eq. 7)."""

REWRITE = """The question below may name its subject ambiguously. Using the information, rewrite it as one question that names its subject unambiguously. Reply with the rewritten question only.

Question: Where was the director born?
Information: Which film did Ambrose Kettel direct? The Sallowmere Affair was directed by Ambrose Kettel.
Rewritten question: Where was Ambrose Kettel, the director of The Sallowmere Affair, born?

Question: {question}
Information: {information}
Rewritten question:"""
"""q* = LLM(q, s) of eq. (4): semantic enrichment when several titles match the entity (§4.3)."""

SUMMARIZE = """Answer the question with the known information. First analyse the question and the known information step by step, then give the answer on a last line that starts with "Answer:".

Question: {question}
Known information: {known}
Analysis:"""
"""The Summarizer, o = Summarizer({a_1 … a_mt}, x) of eq. (2)."""

SUMMARIZE_WITH_EVIDENCE = """Answer the question with the known information. First analyse the question and the known information step by step, then give the answer on a last line that starts with "Answer:". If the known information does not contain the answer, write "Answer: unknown".

Question: {question}
Known information:
{known}
Analysis:"""
"""Ours (``summarizer_reads="pairs_and_chunks"``): the Summarizer reads each sub-question with its sub-answer
and the chunk it was found in, where eq. (2) gives it the sub-answers alone."""

SUMMARIZE_PAIRS = """Answer the question with the known information. First analyse the question and the known information step by step, then give the answer on a last line that starts with "Answer:".

Question: {question}
Known information:
{known}
Analysis:"""
"""Ours (``summarizer_reads="pairs"``): :data:`SUMMARIZE` with each sub-question before its sub-answer."""

SUMMARIZE_WITH_DOCUMENTS = """Answer the question with the known information. First analyse the question and the known information step by step, then give the answer on a last line that starts with "Answer:".

Documents:
{docs}

Question: {question}
Known information: {known}
Analysis:"""
"""Ours (``reader_tokens``): :data:`SUMMARIZE` with the chunks the sub-answers were found in and the question's
own nearest chunks before the question."""

SUMMARIZE_DOCUMENTS = """Answer the question with the documents. First analyse the question and the documents step by step, then give the answer on a last line that starts with "Answer:".

Documents:
{docs}

Question: {question}
Analysis:"""
"""Ours (``summarizer_reads="chunks"``): :data:`SUMMARIZE_WITH_DOCUMENTS` without the sub-answers."""

RESTATED_QUESTION_AGAIN = (
    "That repeats the whole question. Ask a simpler question about one person, place or thing it names, "
    "whose answer helps to answer it."
)
"""Ours: asked once when the first sub-question restates the question (``ask_again_if_restated``)."""

EXTRACT_ANSWER = """Based on the input and the question, give the answer. Answers should be concise and contain only the corresponding keywords.

Input: The Quern Viaduct was designed by Odile Brask, who was born in Vantmoor.
Question: Where was the designer of the Quern Viaduct born?
Output: Vantmoor

Input: The Pellory Library is in Kovenholm while the Marrowick Museum is in Drelsby.
Question: Are the Pellory Library and the Marrowick Museum in the same country?
Output: no

Input: {response}
Question: {question}
Output:"""
"""Short answer from the Summarizer's reasoning, as the authors' pipeline extracts keywords for EM."""

EXAMPLE_ENTITIES = (
    "Quern Viaduct", "Odile Brask", "Vantmoor", "Lisk", "Pellory Library", "Marrowick Museum", "Kovenholm",
    "Drelsby", "Sallowmere Affair", "Tamsin Vole", "Ambrose Kettel",
)
"""The made-up entities of the few-shot examples above."""

EXAMPLE_ANSWERS = (
    "Odile Brask", "Vantmoor", "Kovenholm", "Drelsby", "Quern Viaduct", "The Sallowmere Affair", "Ambrose Kettel",
    "The Quern Viaduct was designed by Odile Brask.", "Odile Brask was born in Vantmoor.",
    "The Pellory Library is in Kovenholm while the Marrowick Museum is in Drelsby.",
)
"""Answers the examples give: an answer equal to one of them was copied from a prompt (flagged, asked again)."""
