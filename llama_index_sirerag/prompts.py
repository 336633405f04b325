"""SiReRAG prompts (Zhang et al., 2024, Appendix F and §5.4), with the sources of their wording."""

SUMMARY_QUERY = "Summarize the provided text, including as many key details as needed."
"""Appendix F ("the same as RAPTOR"); this exact string is the default summary prompt of the
LlamaIndex RAPTOR pack that the authors' notebooks build on. It is asked through LlamaIndex's
``tree_summarize`` synthesizer, as in that pack, which also splits clusters too long for the
model's context."""

ANSWER_SUFFIX = " Answer this question in as fewer number of words as possible."
"""§5.4; the authors' notebooks append it to the question and use the default LlamaIndex QA
template of ``RetrieverQueryEngine``."""

COREFERENCE = """Previous paragraph from Document: {previous}

Instruction:

Rewrite the below paragraph by resolving all entity coreferences with the preceding paragraph from document.

- Resolve all inter-sentence pronoun references.

- Make sure that all pronouns in a sentence refers to some named entity with in the same sentence.

- Explicitly mention entity names wherever necessary to remove ambiguity from a sentence. Remember to make each sentence clear and unambiguous.

- For each entity, use only the one most informative name.

- Do not generate anything except the rewritten paragraph.

Paragraph: {paragraph}

Output:"""
"""Figure 6 (the worked example of the figure is left out to fit small context windows)."""

PROPOSITIONS = """Extract all facts from the document. For each fact, also generate all mentioned named entities.

Instructions

- Generate only the most informative name for each named entity. Example: if John P., Parker, John Parker are coreferential, only generate John Parker
- Consistently use the most informative name for each named entity in all facts.
- You must not include pronouns or ambiguous references in facts. Directly include all relevant named entities
- Respond using json format provided below:
{{"facts": [{{"fact": "A factual statement describing important information (preferably about some entities) from the paragraph", "entities": ["entity 1", "entity 2", "entity 3"]}}, ...]}}

Below is an example for reference.

Paragraph: Locked in a heated battle with Novo Nordisk's semaglutide franchise, Eli Lilly's tirzepatide is beginning to come into its own. As Mounjaro, tirzepatide won its first FDA nod in Type 2 diabetes back in May 2022. In 2023's fourth quarter, Mounjaro generated a whopping $2.2 billion in sales.

Output:
{{"facts": [{{"fact": "Eli Lilly's tirzepatide is competing with Novo Nordisk's semaglutide franchise.", "entities": ["Eli Lilly", "Novo Nordisk", "tirzepatide", "semaglutide"]}}, {{"fact": "Tirzepatide, under the brand name Mounjaro, received its first FDA approval for Type 2 diabetes in May 2022.", "entities": ["tirzepatide", "Mounjaro", "FDA", "Type 2 diabetes"]}}, {{"fact": "Mounjaro generated $2.2 billion in sales in the fourth quarter of 2023.", "entities": ["Mounjaro"]}}]}}

Paragraph: {paragraph}

Output:
"""
"""Figure 7, with two adaptations: the output is a list (``{"facts": [...]}``) instead of keys
"f1", "f2", … so that a JSON schema with ``maxItems`` can constrain small models (without a bound
they loop), and the example is shortened (the figure's text is garbled in the paper)."""

ENTITY_MENTIONS = "This chunk mentions {entities}."
"""Ablation (E), §6.2: a chunk reduced to the entities it mentions."""

EXAMPLE_ENTITIES = ("Eli Lilly", "Novo Nordisk", "tirzepatide", "semaglutide", "Mounjaro", "John Parker")
"""The entities of the few-shot examples above (the paper's own, Figures 6-7); none appears in the
bundled corpus or the datasets (a test checks)."""
