"""HiRAG's prompts (Zhang et al., 2024).

The paper prints only the skeleton of the Decomposer prompt (§4.2: Background, Goal, Constraint,
Workflow, Example, Initialization, each with its first line) and describes the other modules in
prose (§4.3, §4.4, Algorithm 1). The sentences the paper quotes are kept verbatim below; the rest
follows the roles the paper and the authors' released code give each prompt (few-shot, one job
per prompt), written here with our own examples about fictional entities.
"""

DECOMPOSER = """## Background
- You are an expert at analyzing problems and are good at breaking down difficult problems into simple problems.
- A person facing the question "{question}" is asking you for help. The question is hard to answer directly.

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
- Complex question: Where was the architect of the Kesh Bridge born?
  1st simple question: Who was the architect of the Kesh Bridge?
  1st answer: The architect of the Kesh Bridge was Tomas Halvard.
  2nd simple question: Where was Tomas Halvard born?
  2nd answer: Tomas Halvard was born in Dunmere.
  Final output: That's enough.
- Complex question: Are the Orrin Library and the Vale Museum in the same country?
  1st simple question: In which country is the Orrin Library?
  1st answer: The Orrin Library is in Norland.
  2nd simple question: In which country is the Vale Museum?
  2nd answer: The Vale Museum is in Estmark.
  Final output: That's enough.

## Initialization
Reply with one simple question only, or with "That's enough." Now, a first simple question."""
"""System prompt of the Decomposer (§4.2; the quoted lines are the paper's)."""

DECOMPOSE_START = "Let's break down this complex question: {question}"
"""First user turn of the decomposition dialogue; each sub-answer is a later user turn."""

NO_ANSWER = "I could not find the answer to that question."
"""The user turn after a sub-question whose retrieval gave up (workflow step 2.1: rephrase)."""

EXTRACT_ENTITY = """Extract the subject entity of the question: the name of the person, place, work or thing the question asks about. Reply with the name only.

Question: Who designed the Kesh Bridge?
Entity: Kesh Bridge

Question: Where was Tomas Halvard born?
Entity: Tomas Halvard

Question: Who is the director of film The Lantern Road?
Entity: The Lantern Road

Question: When did Ida Venn (painter) die?
Entity: Ida Venn (painter)

Question: {question}
Entity:"""
"""Entity name e = LLM(q) of eq. (3) (§4.3)."""

ANSWER_WITH_KNOWLEDGE = """Answer the question with the known information. First analyse the question and the known information, then give the answer in one sentence on a last line that starts with "Answer:". If the known information does not contain the answer, write "Answer: unknown".

Question: Who designed the Kesh Bridge?
Known information: The Kesh Bridge is a stone arch bridge over the Sable River, completed in 1871 to a design by Tomas Halvard.
Analysis: The question asks for the designer. The known information says the bridge was built to a design by Tomas Halvard.
Answer: The Kesh Bridge was designed by Tomas Halvard.

Question: {question}
Known information: {knowledge}
Analysis:"""
"""r = LLM(q, c_s, p*) of eq. (6): a sub-answer from the single retrieved chunk and the profile (§4.4)."""

CAN_ANSWER = """Based on the response and the question, tell me whether the response answers the question. Your answer must be yes or no.

Response: The nationality of Ida Venn is not given.
Question: What is the nationality of Ida Venn?
Output: no

Response: The Kesh Bridge was designed by Tomas Halvard.
Question: Who designed the Kesh Bridge?
Output: yes

Response: {response}
Question: {question}
Output:"""
"""The Filter's Verify step (§4.4): can the sub-question be solved with what was retrieved?"""

INTERNAL_ANSWER = """Answer the question from your own knowledge in one sentence. If you do not know, say "I don't know".

Question: {question}
Answer:"""
"""Internal knowledge, used with probability (t/m)² after the t-th failed rethink (eq. 7)."""

REWRITE = """The question below may name its subject ambiguously. Using the information, rewrite it as one question that names its subject unambiguously. Reply with the rewritten question only.

Question: Where was the director born?
Information: Which film did Ida Venn direct? The Lantern Road was directed by Ida Venn.
Rewritten question: Where was Ida Venn, the director of The Lantern Road, born?

Question: {question}
Information: {information}
Rewritten question:"""
"""q* = LLM(q, s) of eq. (4): semantic enrichment when several titles match the entity (§4.3)."""

SUMMARIZE = """Answer the question with the known information. First analyse the question and the known information step by step, then give the answer on a last line that starts with "Answer:".

Question: {question}
Known information: {known}
Analysis:"""
"""The Summarizer, o = Summarizer({a_1 … a_mt}, x) of eq. (2)."""

EXTRACT_ANSWER = """Based on the input and the question, give the answer. Answers should be concise and contain only the corresponding keywords.

Input: The Kesh Bridge was designed by Tomas Halvard, who was born in Dunmere.
Question: Where was the designer of the Kesh Bridge born?
Output: Dunmere

Input: The Orrin Library is in Norland while the Vale Museum is in Estmark.
Question: Are the Orrin Library and the Vale Museum in the same country?
Output: no

Input: {response}
Question: {question}
Output:"""
"""Short answer from the Summarizer's reasoning, as the authors' pipeline extracts keywords for EM."""
