"""HiRAG's knobs, each with the paper's value and section (Zhang et al., 2024)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class HiRAGConfig(BaseModel):
    """How a HiRAG run decomposes, retrieves and rethinks. Pass one to
    :func:`~langgraph_hirag.build_hirag_graph`, or change fields for one run:
    ``graph.invoke(input, context={"th3": 6})``."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # a misspelt setting is refused, not ignored

    max_subquestions: int = Field(5, ge=1, description="Most sub-questions per question (Appendix A.1, Table 7: 5).")
    min_subquestions: int = Field(
        2, ge=1, description="Below this many sub-questions, a \"That's enough.\" is answered with one request for the "
        "next sub-question. 1: the Decomposer decides alone, as workflow step 2.2 (§4.2) has it. Ours, 2: the 1.5B "
        "stops after one sub-question in 76 of 100 HotpotQA runs (14 of 27 comparison runs never ask about both "
        "options); on 2Wiki dev 101–140 asking once more gave F1 0.342 against the paper's 0.292 (2 questions better, "
        "0 worse; naive 0.267)."
    )
    fresh_next_question: bool = Field(
        True, description="Below min_subquestions, a sub-question asked again is answered by a fresh prompt: the "
        "question, the answers so far and a request for the next simple question (ours; inside the dialogue the "
        "1.5B repeats its first sub-question, a real first hop on MuSiQue, and the run answers with the bridge "
        "entity). Runs ending after one sub-question, tuning questions 101–140: 17 -> 0 on 2Wiki (F1 0.287 against "
        "0.272), 23 -> 1 on MuSiQue (0.114 against 0.100), no question worse; MuSiQue 101–200: 0.168 against 0.136 "
        "(5 better, 1 worse). False: the repeat ends the decomposition (with min_subquestions=1, the paper's workflow)."
    )
    th1: int = Field(
        1, ge=1, description="More titles than this matching the entity at an attempt: semantic incompleteness, "
        "rewrite (Algorithm 1 lines 20-23; the authors' code: more than one)."
    )
    th2: int = Field(3, ge=1, description="Every th2-th failed attempt rethinks at document level (Algorithm 1 line 31; authors' code: 3).")
    th3: int = Field(
        2, ge=1, description="Attempts per sub-question before giving up (Algorithm 1 line 34; §5.3: 4 retrievals). "
        "Ours, 2: the first chunk and one chunk-level rethink (a document-level one only where the document has no "
        "further chunk), as the 1.5B's third and fourth attempts rarely verify. Dev 101–200 (every other call "
        "replayed): F1 0.195 against 0.192 on MuSiQue (4 better, 2 worse), 0.509 against 0.505 on 2Wiki (1/1), level "
        "on HotpotQA 101–140 (1/1), 0.7–2.1 calls fewer a question. 4: the paper's."
    )
    dense_rethink: bool = Field(
        True, description="When the titles matching the entity run out before th3 attempts, a document-level rethink "
        "goes on to the document of the corpus's chunk nearest the sub-question (dense search) that no attempt read "
        "(ours). False: the sub-question is given up there, the titles being Algorithm 1's only documents; on the demo "
        "\"the river under the Kesh Bridge\" matched one title, whose one chunk names no river. Tuning questions "
        "101–140: 2Wiki F1 0.362 against 0.337 (1 better, none worse), MuSiQue 0.118 both, about one call more."
    )
    m: int = Field(5, ge=1, description="Eq. (7): internal knowledge with probability (t/m)² after the t-th failed rethink (§4.4: 5).")
    seed: int = Field(0, description="Seed of the (t/m)² draws (a hash of seed, question, sub-question and t).")
    title_candidates: int = Field(20, ge=1, description="Titles BM25 ranks per entity (authors' code: 20).")
    rewrite_top_k: int = Field(
        1, ge=1, description="Chunks the whole-corpus search returns after a rewrite (the paper's web search stand-in; "
        "a search result page gives several snippets, the 1.5B's rewrites read one chunk per restated question). 3 on the "
        "tuning questions 101–140 (2026-11-30): 1 answer better and 3 worse (the further chunks bring a neighbouring "
        "entity), so it stays 1."
    )
    use_profiles: bool = Field(True, description="Give the Filter the document's profile with the chunk (eq. 3's p*; False: Table 4's 'w/o profile').")
    verify_reads_chunk: bool = Field(
        False, description="The Filter's yes/no sees the chunk and profile the sub-answer came from (Algorithm 1, line 25 "
        "passes c_s); False: the sub-answer and the sub-question only (eq. 6 as the authors' code has it), so a wrong "
        "entity read fluently passes. On the tuning questions 101–140 (2026-11-30) True moved 4 answers up and 3 down "
        "over the three datasets for 1.5–2 more calls a question, so it stays off."
    )
    grounded_sub_answers: bool = Field(
        True, description="A sub-answer naming a person, place or thing (a run of capitalised words) that neither its "
        "chunk and profile nor its sub-question names fails verification without the Filter's call, and rethink goes "
        "on (ours; Algorithm 1, line 25 verifies against the chunk c_s). False: the Filter's yes/no alone (eq. 6). On "
        "the demo the 1.5B read \"the Velmora River\" and \"Caldor, Norway\" from chunks naming neither, and the "
        "Filter, which sees no chunk, verified both. Tuning questions 101–140: F1 0.337 against 0.287 on 2Wiki, 0.118 "
        "against 0.114 on MuSiQue, 3 questions better and none worse."
    )
    summarizer_reads: Literal["sub_answers", "pairs", "pairs_and_chunks", "chunks"] = Field(
        "sub_answers", description="What the Summarizer reads as its known information. 'sub_answers': the sub-answers "
        "alone, as eq. (2) has it; 'pairs' (ours): each sub-question with its sub-answer, so the model sees which answer "
        "closes which hop — on the tuning questions 101–140 8 answers better and 7 worse than eq. (2) (2Wiki 4/3, "
        "MuSiQue 2/2, HotpotQA 2/2), so it is not the default; 'pairs_and_chunks' (ours): each pair and the chunk it "
        "was found in (the 1.5B's one-sentence sub-answers lose the rest of the chunk), with \"Answer: unknown\" allowed; "
        "'chunks' (ours; needs reader_tokens): the documents of reader_tokens alone, so decomposition chooses what is "
        "read and no wrong sub-answer is read as a fact — MuSiQue dev 101–200: F1 0.137 against 0.163 (12 better, "
        "15 worse), so off: the sub-answers carry more right hops than wrong ones."
    )
    comparison_example: bool = Field(
        True, description="A question naming two options (\"Who was born later, X or Y?\") gets a Decomposer whose "
        "examples end with one such comparison, asked option by option with the question's own attribute (ours; §4.2's "
        "Example section prints none). False: the same examples for every question, where the 1.5B restated such a "
        "question as its first sub-question and then asked another attribute (\"When did X die?\" for \"born later\"). "
        "Dev 101–200 (the other questions' prompts unchanged, replayed): 2Wiki F1 0.525 against 0.515 (3 better, 2 "
        "worse; 34 of 41 such decompositions changed), HotpotQA 0.431 against 0.426 (1 / 1), MuSiQue names no options."
    )
    compare_years: bool = Field(
        True, description="A question naming two options and an order in time (\"Which film came out first, X or "
        "Y?\") is answered without the Summarizer's call when the sub-answers to its when-questions give each option "
        "one year: the earlier or the later option (ours; False: eq. 2's Summarizer answers every question). The 1.5B, "
        "given both years, named the later film for \"came out first\" (2012 against 2008, 1970 against 1960). Dev "
        "101–200: it decided 7 of 2Wiki's questions (2 answers better, none worse: F1 0.545 against 0.525) and 2 of "
        "HotpotQA's (1 better: 0.441 against 0.431)."
    )
    years_from_reading: bool = Field(
        True, description="With compare_years, a comparison in time its sub-answers leave undecided first asks the "
        "Summarizer's reading (the known information and the documents of reader_tokens) for each option's date, a "
        "line each (``multihop_rag.time_order.YEARS``, or the years of life for \"lived longer\"), and two years "
        "that differ answer it without the Summarizer; not when the dates are another's, a hop behind each option "
        "(\"Which film has the director born earlier, X or Y?\"), which the reading need not hold (ours; False: "
        "eq. 2's Summarizer). Dev 101–200, every other call replayed: 2Wiki F1 0.565 against 0.545 (2 better, none "
        "worse; 11 of its 18 such questions asked), HotpotQA level (1 asked, the same answer). Asked for every "
        "comparison in time, hops included (2026-12-06, code then removed): 2Wiki 0.535 (3 better, 4 worse, the 4 "
        "all about the films' directors)."
    )
    compare_quantities: bool = Field(
        True, description="A question naming two options and one direction of amount (\"Which mountain is taller, "
        "X or Y?\", \"Which genus has more species, X or Y?\") first asks the Summarizer's reading (the known "
        "information and the documents of reader_tokens) for each option's number and unit, a line each "
        "(``multihop_rag.quantity_order.QUANTITIES``); one number each, in one unit, that differ answer it without "
        "the Summarizer (ours; False: eq. 2's Summarizer answers every question). HotpotQA's tuning questions (dev "
        "101–200) ask three (2Wiki's and MuSiQue's none): the numbers decided two, as the Summarizer had answered them, "
        "for one call each (F1 0.441 both); ReSP, whose generator had one of them wrong, gained it."
    )
    ask_again_if_restated: bool = Field(
        False, description="A first sub-question that restates the question (content-word overlap ≥ restate_threshold) "
        "is asked again once, as the Decomposer's initialization wants a simple question (§4.2; ours: the 1.5B restates)."
    )
    restate_threshold: float = Field(0.8, ge=0.0, le=1.0, description="Overlap with the question that counts as a restatement.")
    answer_without_evidence: bool = Field(
        True, description="With no sub-question answered, still let the Summarizer answer (from the model's "
        "memory), as eq. (2) does; False: the answer is \"unknown\" (ours: an answer from outside the corpus is worse than none)."
    )
    grounded_extraction: bool = Field(
        True, description="A short answer extracted from the Summarizer's answer line with a word found neither there "
        "nor in the question is replaced by that line (ours; False: the extraction's reply as it is, as the authors' "
        "keyword extraction for EM takes it). On the demo the 1.5B extracted \"London\" from \"Dunmere, Astrelia\"; "
        "MuSiQue 101–200: F1 0.168 against 0.151 (5 better, none worse)."
    )
    answer_with_option: bool = Field(
        True, description="A question naming two options (\"Who was born first, X or Y?\") whose extracted answer "
        "names neither is extracted once more, asked for one of the two as written; an answer naming one is "
        "replaced by that option (ours; False: the extraction's answer as it is). On HotpotQA the 1.5B answered "
        "\"Which dog is based in Switzerland, Appenzeller Sennenhund or Drentse Patrijshond?\" with \"Switzerland\"."
    )
    reader_tokens: int = Field(
        350, ge=0, description="The Summarizer also reads, within this many tokens, the chunks the sub-answers were "
        "found in (in their order) and then the question's own nearest chunks (dense search over the corpus), each "
        "once, listed by title. Ours; 0: the sub-answers alone, as eq. (2) has it. 700 (naive RAG's reading) on the "
        "tuning questions 101–140, every other call replayed: MuSiQue F1 0.118 → 0.175 (3 answers better, none worse), "
        "HotpotQA 0.358 → 0.429 (3/1), 2Wiki 0.362 → 0.381 (3/3); MuSiQue 101–200: 0.136 → 0.168 (8/4); no call added. "
        "350 against 700 (dev 101–200, 'short' style): 2Wiki 0.511 against 0.505 (4/4), HotpotQA 101–140 0.446 against "
        "0.438 (3/2), MuSiQue 0.174 against 0.192 (3/8; EM 0.11 against 0.09, seven of the eight lose the partial-credit "
        "word \"County\" from two wrong answers), the Summarizer's call 13.1 → 5.5 s; with th3=2 MuSiQue 0.194 (6/8)."
    )
    fallback_below: int = Field(
        2, ge=0, description="When fewer sub-questions than this were answered and the question names no two options, "
        "the Summarizer reads as naive RAG's reader does: the question's nearest chunks within fallback_tokens, without "
        "the sub-answers (ours; 0: eq. 2's Summarizer, which reads the sub-answers whatever they are). A decomposition "
        "that closed one hop or none hands the Summarizer a first hop at best, which the 1.5B answers with; on MuSiQue's "
        "tuning questions (dev 101–200) those runs scored 0.091 against naive RAG's 0.249 (0 better, 8 worse). Dev "
        "101–200, every other call replayed: MuSiQue F1 0.194 → 0.211 (7 better, 4 worse), HotpotQA 0.441 → 0.493 (6 "
        "better, none worse; +0.051 [+0.011, +0.094]), 2Wiki 0.565 → 0.573 (3 / 1), no call added. With comparisons "
        "included HotpotQA lost three of them (0.463: one answered option is half the evidence of a comparison)."
    )
    fallback_tokens: int = Field(700, ge=1, description="The fallback's reading in tokens (naive RAG's five chunks).")
    summary_style: Literal["analysis", "short", "step"] = Field(
        "step", description="How the Summarizer answers. 'analysis': it analyses step by step and ends on an "
        "\"Answer:\" line (eq. 2), from which a second call extracts the keywords (the authors' pipeline, for EM); "
        "'short' (ours): one call with naive RAG's short-answer prompt over the same reading (documents, then the "
        "known information), so a small model spends no tokens on an analysis and no call on the extraction. Ours, "
        "'short': on dev 101–200 (the 1.5B, every call before the Summarizer's replayed) 2Wiki F1 0.369 → 0.505 (22 "
        "answers better, 6 worse; +0.136 [+0.046, +0.225]), MuSiQue 0.163 → 0.192 (12 / 8), a call fewer a question; "
        "on 2Wiki's 41 questions naming two options 12 better and 3 worse (the 1.5B's analysis picks the wrong one). "
        "'step' (ours, the default): as 'short', but a question naming no two options and not asking yes or no is "
        "answered in two lines, a \"Step:\" line saying what the question's description refers to, then the "
        "\"Answer:\" line, which is read (a reply without one is asked as 'short'); the 1.5B otherwise answers with "
        "the first hop it was handed (the gold passages alone: 25 of its 62 wrong MuSiQue answers). Dev 101–200 "
        "against 'short', every other call replayed: MuSiQue F1 0.211 → 0.253 (11 better, 6 worse; +0.042 [−0.007, "
        "+0.095]), HotpotQA 0.493 → 0.490 (5 / 3), 2Wiki 0.573 → 0.575 (1 / 2). For every question it lost 2Wiki's "
        "comparisons and yes/no questions to sentences (0.505, 1 / 10, resolved worse)."
    )
    max_output_tokens: int = Field(256, ge=16, description="Token cap of every generation (ours: the paper states none).")

    @model_validator(mode="after")
    def _bounds_in_order(self) -> Self:
        # A default min above a user's max is moot (the max ends decomposition first); a chosen one is a mistake.
        if "min_subquestions" in self.model_fields_set and self.min_subquestions > self.max_subquestions:
            raise ValueError(f"min_subquestions ({self.min_subquestions}) exceeds max_subquestions ({self.max_subquestions})")
        if self.summarizer_reads == "chunks" and not self.reader_tokens:
            raise ValueError("summarizer_reads='chunks' reads the documents of reader_tokens: set reader_tokens above 0")
        return self
