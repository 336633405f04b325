"""ReSP's knobs, each with the paper's value and section (Jiang et al., 2024)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ReSPConfig(BaseModel):
    """How a ReSP run retrieves, loops and re-plans. Pass one to :func:`~langchain_resp.build_resp_graph`,
    or change fields for one run: ``graph.invoke(input, context={"max_iterations": 2})``."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # a misspelt setting is refused, not ignored

    top_k: int = Field(5, ge=1, description="Documents retrieved per round (§5.2: top-5).")
    max_iterations: int = Field(3, ge=1, description="Most rounds of retrieval; then the answer is generated (§5.2: 3).")
    min_iterations: int = Field(
        1,
        ge=1,
        description="Rounds of retrieval before the judge is first asked; earlier rounds go straight to the planner "
        "(1: the judge after every round, as Figure 2 and §4.1 have it). Ours: the 1.5B's judge says Yes after "
        "round 1 in 81 of 100 HotpotQA runs, fewer than half of them right.",
    )
    judge_threshold: float | None = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="The judge says Yes when P(Yes) — from the first token's logprobs against No's — reaches this; a "
        "backend returning no logprobs falls back to the reply. None: the model's greedy Yes/No reply, as Table 1 "
        "has it. Ours, 0.5: on 2Wiki dev 101–140 (the 1.5B, prompt-state cache on) it stops 25 of 40 runs after "
        "round 1 and sends 13 to round 3: F1 0.365 against naive's 0.267 in 34.0 s a question (naive 9.8 s); 0.75–0.9 "
        "send 34–37 of 40 to round 3 for F1 0.402 at about twice the seconds (59.7 s on the first 10 questions), and "
        "the greedy reply ended most runs after round 1 with F1 0.283 (benchmarks/judge_threshold.py); MuSiQue "
        "101–200: 0.188 at 0.5 against 0.156 greedy (5 better, none worse).",
    )
    max_output_tokens: int = Field(200, ge=1, description="Token cap of every generation (§5.2: maximum output length 200).")
    repeat_threshold: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="A planned sub-question sharing this share of its content words (over the larger set) with the "
        "question or an earlier sub-question repeats it (ours: the paper's planner prompt only says not to repeat).",
    )
    reader_tokens: int = Field(
        700,
        ge=0,
        description="The generator reads the combined memory and, within this many tokens, the retrieved documents "
        "of every round (deduplicated, round by round in rank order). 0: the memory only, as Table 1's "
        "generation prompt and §4.3 have it. Ours, 700 (about naive RAG's five chunks), with reader_min_rounds=2: "
        "the 1.5B's summaries drop the answer (a median of ~38 tokens against naive's five chunks); MuSiQue dev "
        "101–200: F1 0.188 against 0.150 with 0 (7 better, none worse).",
    )
    reader_min_rounds: int = Field(
        2,
        ge=1,
        description="The generator reads the documents (within reader_tokens) only when the run made at least this "
        "many rounds of retrieval; a run the judge ended sooner is answered from the memory alone (1: whenever "
        "reader_tokens > 0). Ours, 2: on the tuning questions (dev 101–140, the 1.5B) reading after every run "
        "moved 7 answers up and 5 down, 3 of the 5 in runs the judge ended after round 1, whose memory is the "
        "summary of those same documents; from round 2 on, 6 up and 2 down (MuSiQue F1 0.135 → 0.198, 2Wiki "
        "0.365 → 0.369, HotpotQA 0.501 → 0.484); on dev 101–200, 2 against 1: MuSiQue 0.188 against 0.198 (1 better "
        "at 1, none worse), 2Wiki 0.385 against 0.365 (none better at 1, 2 worse), so 2 stays.",
    )
    shared_prefixes: Literal["off", "documents", "all"] = Field(
        "off",
        description="Prompts open with what a round's calls share, so llama.cpp's prompt cache (and a server's) reads "
        "it once: \"documents\", the Local Pathway summary with the round's documents, as the Global Evidence one "
        "does; \"all\", also the judge, the planner and the re-plan with the memory and the question. The "
        "instructions, worded as Table 1's, follow. \"off\": Table 1's order (its Local Pathway, Judge and Plan "
        "prompts open with the instruction or question, so each call reads the documents or the memory again). "
        "Ours, off: \"all\" on 2Wiki dev 101–140 (the 1.5B, prompt cache on) cut ReSP from 10.8 to 8.3 calls a "
        "question but F1 from 0.402 to 0.275, its memory-first judge's P(Yes) reaching judge_threshold after round 1 "
        "on 12 of 40 questions (Table 1's: 1); \"documents\" leaves the judge's prompt as Table 1 has it.",
    )
    reread_documents: bool = Field(
        True,
        description="Each round summarizes all its top_k documents, also those an earlier round read (Algorithm 1, "
        "line 5). False (ours): from round two on, both summaries read only the documents no earlier round "
        "retrieved — their facts are in the global memory already — and a round that brings nothing new adds no "
        "global summary, its sub-question answered from its documents as they are. On two CPU cores reading the "
        "documents is most of ReSP's time, and 28 % of later rounds' documents are repeats; measured on 2Wiki dev "
        "101–140 (the 1.5B): a quarter fewer prompt tokens, but F1 0.276 against 0.402 (7 worse, 6 of them "
        "comparisons), so the paper's behaviour stays the default.",
    )
    replan_on_repeat: bool = Field(
        True,
        description="On a repeat, ask the planner once more, naming the repetition; a second repeat ends the loop "
        "(False: the first repeat ends it).",
    )
    compare_years: bool = Field(
        True,
        description="A question naming two options and an order in time (\"Which film came out first, X or Y?\") is "
        "answered by the years: the generator's reading (with the documents, whatever the rounds) is asked for each "
        "option's date, a line each, and when each line gives its option a year (for born, older or younger the "
        "first of a life's span, for died the last) and the two differ, the earlier or later option is the answer; "
        "otherwise the generator answers as before (ours; False: Table 1's generator answers every question). On "
        "2Wiki's comparisons ReSP picked the wrong option as often as naive RAG (0.537 on dev 101–200's 41), from "
        "documents that held both years. Dev 101–200, every other call replayed: 2Wiki F1 0.465 against 0.385 (9 "
        "better, 1 worse; 23 of 41 decided, 21 right), HotpotQA 0.451 against 0.441 (1 / 0; 3 decided); MuSiQue "
        "names no options. A line must give one year: 2Wiki 0.425 (4 / 0, 12 decided). \"Who lived longer, X or Y?\" "
        "(and \"lived to an older age\", once read as born earlier) asks for each one's birth and death and picks "
        "the longer life: 2Wiki 0.515 against 0.505 (1 better, none worse; 2 of 3 decided).",
    )
    compare_countries: bool = Field(
        True,
        description="A question asking whether two things share a country or a nationality (\"Are X and Y from the "
        "same country?\") is answered by their countries: the generator's reading (with the documents, whatever the "
        "rounds) is asked for each one's country, a line each, and when each line names one country the answer is "
        "\"Yes\" if they are one, else \"No\"; otherwise the generator answers (ours; False: Table 1's generator). "
        "After three rounds, ReSP answered \"No\" to 6 of 2Wiki's 11 such tuning questions (dev 101–200) whose "
        "answer is \"Yes\"; naive RAG to 1. Dev 101–200, every other call replayed: 2Wiki F1 0.505 against 0.465 (+0.040 "
        "[+0.010, +0.080], 4 better, none worse; 9 of 12 decided); HotpotQA's and MuSiQue's tuning questions ask none.",
    )
    answer_check: bool = Field(
        True,
        description="A generator answer that is a heading of its reference (\"Global evidence memory\") or a bare "
        "Yes/No to a question asking neither is asked once more, the question followed by a request for what it asks "
        "(``prompts.ANSWER_WHAT_IS_ASKED``; ours; False: Table 1's generator as it answers). Such an answer is never right: "
        "dev 101–200, every other call replayed: HotpotQA asked 2, F1 0.467 against 0.461 (1 better: \"Global evidence "
        "memory\" became the league), MuSiQue asked 3 (one \"No\" became another wrong name), 2Wiki none.",
    )
    compare_quantities: bool = Field(
        True,
        description="A question naming two options and one direction of amount (\"Which mountain is taller, X or "
        "Y?\", \"Which genus has more species, X or Y?\") is answered by the numbers: the generator's reading (with "
        "the documents, whatever the rounds) is asked for each option's number and unit, a line each "
        "(``multihop_rag.quantity_order.QUANTITIES``), and when each line gives one, in the same unit, and the two "
        "differ, the larger or smaller option is the answer; otherwise the generator answers (ours; False: Table 1's "
        "generator). HotpotQA's tuning questions (dev 101–200) ask three (2Wiki's and MuSiQue's none), all three "
        "decided: F1 0.461 against 0.451 (1 better, none worse: \"Manaslu\" for \"Which peak stands higher\").",
    )

    @model_validator(mode="after")
    def _rounds_in_order(self) -> Self:
        if self.min_iterations > self.max_iterations:
            raise ValueError(f"min_iterations ({self.min_iterations}) exceeds max_iterations ({self.max_iterations})")
        return self
