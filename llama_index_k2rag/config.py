"""K²RAG's knobs with the paper's defaults (§3.1.2, §3.1.3)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

EntityLinking = Literal["llm", "question", "both"]
"""How a question finds its entities in the graph: the LLM's synonyms (LlamaIndex's default), the entities the
question names (:class:`~llama_index_k2rag.question_entities.QuestionEntityRetriever`, no call), or both; the
embedding-nearest entities are looked up in every case."""

TripleOrder = Literal["rank", "name"]
"""Which of a question's triples the graph's retrievers keep (LlamaIndex keeps the first 30) and in what order: those of
its best-matched entities first ('rank'), or by name ('name')."""

FinalReads = Literal["summary", "pairs"]
"""What step E reads beside the KG summary: the summary of the sub-answers run together (Algorithm 2), or each
sub-question with its answer, the user's question first."""


class K2RAGConfig(BaseModel):
    """How a K²RAG index is built and queried."""

    model_config = {"frozen": True, "extra": "forbid"}  # a misspelt setting is refused, not ignored

    chunk_size: int = Field(256, description="S for the dense and sparse stores (§3.1.2).")
    chunk_overlap: int = Field(20, description="O for the dense and sparse stores (§3.1.2).")
    kg_chunk_size: int = Field(300, description="S for the knowledge graph (§3.1.2).")
    kg_chunk_overlap: int = Field(100, description="O for the knowledge graph (§3.1.2).")
    kg_result_chunk_size: int = Field(128, description="S when splitting the summarized KG answer (§3.1.3).")
    kg_result_chunk_overlap: int = Field(10, description="O when splitting the summarized KG answer (§3.1.3).")
    alpha: float = Field(0.8, ge=0.0, le=1.0, description="λ of eq. (4): weight of the dense cosine (§3.1.3: 0.8).")
    similarity_top_k: int = Field(10, description="k of eq. (3) (§3.1.3: 10).")
    candidates: int = Field(50, description="Chunks each store proposes before eq. (4) rescoring picks the top k.")
    min_summary_tokens: int = Field(
        128,
        description="Documents shorter than this are indexed as they are: a summary would not shorten them. Ours, "
        "128 (Algorithm 1 summarizes every document): at 300, one graph chunk, HotpotQA dev 101–120 gave support@10 "
        "1.000 against 0.775 but F1 0.392 against 0.557 (6 answers worse, none better): the 1.5B reads summaries better.",
    )
    summary_share: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="Ask the LLM summarizer for at most this share of a document's tokens (ours; the paper's LED "
        "summarizer cut its news corpus by 89 %, where the 1.5B asked for 'a few sentences' cuts 18–22 %); None: a few "
        "sentences. 0.33 on three tuning pools (HotpotQA dev 101–140, 2Wiki dev 101–120): the corpus cut by 33–41 %, "
        "the summaries' tokens halved, F1 0.459 against 0.478 (6 better, 4 worse), so None stays.",
    )
    retrieve_for_question: bool = Field(
        True,
        description="The user's question is asked of the hybrid retriever too, as the first sub-question (ours; "
        "False: Algorithm 2, which retrieves only for sub-questions written from the KG answer: a small model's "
        "one-phrase KG answer leaves the question's own passages unread, support@10 0.45 against naive's 0.90). "
        "With kg_step='context', HotpotQA dev 101–120: F1 0.557 against the paper's 0.283 (naive 0.317).",
    )
    kg_step: Literal["answer", "context"] = Field(
        "context",
        description="What step A hands on: the graph's answer (Figure 8, Algorithm 2: 'answer') or its evidence, the "
        "triples and source text the graph retrieved for the question (ours, 'context': the 1.5B's KG answer is one "
        "phrase, and 12 of 20 sub-questions written from it shared no content word with the question; issue 41). "
        "With retrieve_for_question, HotpotQA dev 101–120: F1 0.557 against the paper's 0.283 (naive 0.317).",
    )
    sub_answer_sees_question: bool = Field(
        False,
        description="Answer each sub-question with the user's question in view (Algorithm 2, line 22 passes it; "
        "§3.1.3's prose, the default here, answers the sub-question alone).",
    )
    reader_tokens: int = Field(
        0,
        ge=0,
        description="Step E reads, beside the KG summary and the sub-answer summary, the chunks the hybrid retriever "
        "found for the user's question, in rank order within this many tokens (ours; 0: Algorithm 2, whose final "
        "answer reads the two summaries only). 700 (about naive RAG's five chunks) on HotpotQA dev 101–120: F1 0.433 "
        "against 0.557 (1 better, 3 worse): the 1.5B picks a wrong name from the raw chunks, so 0 stays.",
    )
    final_reads: FinalReads = Field(
        "summary",
        description="What the final answer reads beside the KG summary: the summary of the sub-answers run together "
        "('summary', Algorithm 2 lines 26–27) or each sub-question above its answer, the user's own first "
        "('pairs', ours: run together, the 1.5B could not tell the answer to the question from that to a sub-question "
        "written from a wrong entity; issue 41; no call more). 'pairs' against 'summary' on three tuning pools: HotpotQA dev "
        "101–120 F1 0.524 against 0.640 (none better, 3 worse), 2Wiki 101–120 0.258 against 0.295 (3 better, 4 worse), "
        "HotpotQA 121–140 0.617 against 0.500 (4 better, 1 worse); 7 better and 8 worse in all, so 'summary' stays.",
    )
    max_kg_paths_per_chunk: int = Field(
        10,
        description="Triples the property-graph extractor asks for per chunk (LlamaIndex's 10), one a line. 6 on "
        "HotpotQA dev 101–120: 39 % fewer graph tokens but F1 0.450 against 0.640 (5 worse, none better), so 10 stays.",
    )
    stop_kg_reply: bool = Field(
        True,
        description="Stop the extractor's reply after max_kg_paths_per_chunk lines (ours: the 1.5B wrote up to 39, a "
        "fifth of the graph's tokens past the tenth); False: LlamaIndex's, the whole reply read and every triple kept. "
        "F1 against whole replies: HotpotQA dev 101–120 0.640 against 0.557 (2 better, none worse), 2Wiki dev 101–120 "
        "0.350 against 0.325 (1 better, 1 worse).",
    )
    kg_entity_linking: EntityLinking = Field(
        "llm",
        description="How the property graph finds a question's entities, beside the embedding-nearest ones: the LLM's "
        "synonyms ('llm', LlamaIndex's default; the paper's GraphRAG matches entities by embedding), the entities the "
        "question names, found by their words with no call ('question', ours), or both. 'question' on HotpotQA dev "
        "101–120: F1 0.445 against 0.557 (1 better, 4 worse): a longer graph context (3,000 characters against 2,470) "
        "the 1.5B answered worse from; 'both' 0.433 against 0.640 (none better, 5 worse), so 'llm' stays.",
    )
    compare_years: bool = Field(
        True,
        description="A question naming two options and an order in time is answered by the years the final answer's "
        "source nodes give each option, a line each, when they decide (:mod:`multihop_rag.option_comparisons`, as "
        "SiReRAG's, ReSP's and HiRAG's); Algorithm 2's answer otherwise (ours; False: Algorithm 2 for every question). "
        "2Wiki dev 101–120 (pool of 20), every other call replayed: 2 of 4 decided, both right, F1 0.295 → 0.345 (1 "
        "better, none worse: \"Alice K. Bache\" for \"Who lived longer?\"); HotpotQA's one undecided.",
    )
    compare_quantities: bool = Field(
        True,
        description="A question naming two options and a direction of amount is answered by the numbers the source "
        "nodes give each option, in one unit, when they decide; Algorithm 2's answer otherwise (ours; False: "
        "Algorithm 2 for every question). HotpotQA dev 101–120: its one such question decided right (as Algorithm 2 "
        "had answered it), F1 0.640 either way.",
    )
    kg_triple_order: TripleOrder = Field(
        "rank",
        description="Which of the matched entities' triples the property graph keeps (LlamaIndex keeps 30) and in what "
        "order: those of the best-matched entities first ('rank', ours), or by name ('name'). LlamaIndex's own order "
        "follows the process's string hashing, so it changed from run to run; neither is the paper's (GraphRAG). "
        "'rank' against 'name': 2Wiki dev 101–120 F1 0.295 against 0.245 (1 better, none worse), HotpotQA dev "
        "101–120 0.640 both.",
    )
