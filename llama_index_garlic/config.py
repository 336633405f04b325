"""GARLIC's knobs, with the paper's defaults (§3, §4.1) and Table 2's ablation switches."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from llama_index_garlic.search import StartFrom


class GarlicConfig(BaseModel):
    """How a GARLIC graph is built and searched."""

    model_config = {"frozen": True, "extra": "forbid"}  # a misspelt setting is refused, not ignored

    chunk_size: int = Field(300, description="Tokens per level-1 chunk (§3.1).")
    n_s: int | None = Field(
        None,
        description="Token threshold of one summarization batch, prompt and summary included, and of the "
        "search prompt (§3.1, §4.1: 8K). None: min(8192, the LLM's context window).",
    )
    summary_tokens: int | None = Field(
        None, description="Tokens of n_s reserved for the generated summary (and its max_tokens). None: n_s // 4."
    )
    max_levels: int = Field(8, description="Most summary levels above the chunks (a guard; the paper has none).")
    stop_patience: int = Field(1, description="Search stops after this many 'Yes' answers (§3.2.1, p = 1 in Table 1).")
    search_window: int | None = Field(
        None, description="Token cap of the search prompt (None: n_s, as in §4.1). Lets a small n_s build a deep graph "
        "while the search uses the LLM's whole context.",
    )
    answer_tokens: int = Field(256, description="Tokens of n_s kept free for the search's replies and answer.")
    token_margin: float = Field(
        0.1,
        description="Share of the LLM's context window the search prompt leaves free, because tokens are counted "
        "with tiktoken and the LLM's own tokenizer and chat template may count more (Qwen2.5 counted a "
        "7,936-token prompt as 8,217 and overflowed an 8,192 window).",
    )
    max_steps: int | None = Field(None, description="Most nodes added by the search (None: until Yes, budget or graph end).")
    attention_search: bool = Field(
        False,
        description="Add z = Eᵀa to the search's scores when an attention model is loaded (§3.2.2; True is the paper's "
        "search). Ours, False: the query–node similarity alone, Table 2's 'w/o attention search'; on HotpotQA dev "
        "101–120 (pool of 199 passages) the 1.5B's attention search reached a chunk in 5 of 20 searches, this one in 13, "
        "F1 0.241 against 0.207 (3 questions better, none worse), 140 s a question against 186 and half the memory "
        "(the command line's attention_model=auto then loads no attention model: only this search reads the edges' "
        "weights; issue 41).",
    )
    embedding_search: bool = Field(True, description="Add query–node embedding similarity (Table 2: 'w/o embedding similarity search').")
    kv_cache: bool = Field(True, description="Reuse the attention model's KV cache across search steps (Appendix C).")
    dynamic_progress_control: bool = Field(
        True,
        description="The LLM decides when to stop (§3.2.1). False is Table 2's 'w/o Dynamic Progress Control': the "
        "search visits `fixed_nodes` nodes and asks no Yes/No. Measured on 2Wiki's tuning pool (dev 101–120, the 1.5B): "
        "one call and 2,500 prompt tokens a question against 10.8 calls, but F1 0.224 against 0.333 (none better, 4 "
        "worse), so the paper's control stays.",
    )
    fixed_nodes: int = Field(
        17,
        ge=1,
        description="Nodes a search without Dynamic Progress Control visits (Table 2: GARLIC's average, 17 on "
        "HotpotQA); its starting top-level nodes are at most fixed_nodes / levels, the most query-similar.",
    )
    start_nodes: int | None = Field(
        4,
        ge=1,
        description="Top-level nodes the search starts from, the most query-similar (ours, from Table 2's fixed-budget "
        "variant, which starts from fixed_nodes / levels of them). None: the whole top level, as §3.2.1 has it, which on "
        "a pooled corpus is many points (19 on HotpotQA's tuning pool of 199 passages) read before any chunk. Ours, 4: "
        "on HotpotQA dev 101–120 F1 0.294 against 0.241 (3 questions better, 2 worse), 9 nodes read a search instead "
        "of 24, 57 s a question against 140 (issue 41).",
    )
    start_from: StartFrom = Field(
        "top_level",
        description="Where the start_nodes most query-similar nodes are drawn from: 'top_level', as §3.2.1 starts, or "
        "'all_levels' (ours), every level's nodes, chunks included. On the run of record's pooled corpora the top level "
        "is 48–96 paraphrases of unrelated passages, and the 1.5B said \"Yes\" over the 4 it started from in most "
        "searches (issue 41). On 2Wiki dev 101–120 (a graph with a top level of 41 points) 'all_levels' scored F1 0.260 "
        "against 0.301 (4 questions better, 2 worse) for 14.7 calls a question against 10.8, so 'top_level' stays.",
    )
    ask_after_chunk: bool = Field(
        False,
        description="The Yes/No of Dynamic Progress Control is first asked once the search has read a level-1 chunk; "
        "until then it goes down unasked (ours; False: asked from the first step, §3.2.1). On the run of record's "
        "pools the 1.5B said \"Yes\" over top-level points before any chunk in most searches and answered from them. "
        "HotpotQA tuning pool (questions 101–120), every other call replayed: support@10 0.45 → 0.63 but F1 0.294 → "
        "0.266 (2 answers better, 2 worse; naive 0.317), 7.0 calls a question against 7.8; so it is off.",
    )
    yes_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Dynamic Progress Control says Yes when P(Yes), read from a free reply's first token against No's, "
        "reaches this; a backend returning no logprobs (LlamaIndex's Ollama) falls back to the reply. None: the model's "
        "reply, constrained to {\"answer\": \"Yes\"|\"No\"} where the backend allows it (§3.2.1, Table 5). Ours, as "
        "ReSP's judge_threshold: constrained so, the 1.5B said Yes over the four unrelated top-level points it started "
        "from in most of the run of record's MuSiQue searches (issue 41). Measured at 0.5 on 2Wiki dev 101–120: the "
        "1.5B's P(Yes) stays at 0.10–0.40 step after step, so 2 of the first 3 searches read to the window (32 and 71 "
        "nodes), 205 s a question against 67, no answer scoring otherwise; stopped there, and None stays.",
    )
    short_answer: bool = Field(
        True,
        description="Every answer prompt also asks for as few words as possible, SiReRAG §5.4's instruction that the "
        "other methods' readers carry, naive RAG's included (ours; False: Table 5's 'as concisely as you can' alone, "
        "which the 1.5B answers with a sentence restating the question in 11 of 20 2Wiki and 17 of 20 MuSiQue tuning "
        "runs). On the tuning pools of questions 101–120, the search replayed: MuSiQue F1 0.045 → 0.124 (3 better, none "
        "worse), 2Wiki 0.301 → 0.333 (2 better, 1 worse); HotpotQA 0.207 → 0.233 under the paper's search (2 / 2) and 0.241 → "
        "0.237 without its attention search (5 / 3; issue 41).",
    )
    compare_years: bool = Field(
        False,
        description="A question naming two options and an order in time (\"Which film came out first, X or Y?\") is "
        "answered by the years the visited nodes give each option, a line each, when they decide "
        "(:mod:`multihop_rag.option_comparisons`, as SiReRAG's, ReSP's and HiRAG's); the search's answer otherwise "
        "(ours; False: Table 5's answer for every question). Off: on the tuning pools (dev 101–120) it decided 2 of "
        "2Wiki's 4 such questions, 1 right and 1 wrong (the 1.5B's years from the 5 nodes a search read), F1 0.333 "
        "either way; HotpotQA's one went undecided.",
    )
    compare_quantities: bool = Field(
        True,
        description="A question naming two options and a direction of amount (\"Which mountain is taller, X or Y?\") "
        "is answered by the numbers the visited nodes give each option, in one unit, when they decide; the search's "
        "answer otherwise (ours, as SiReRAG's, ReSP's and HiRAG's; False: Table 5's answer for every question). "
        "HotpotQA's tuning pool (dev 101–120) asks one, decided right (\"Manaslu\" for \"Muztagh Ata\"): F1 0.238 → "
        "0.288; 2Wiki's and MuSiQue's ask none.",
    )
    summary: Literal["graph", "tree", "none"] = Field(
        "graph",
        description="'graph': many-to-many bullet IPs (§3.1); 'tree': Table 2's 'w/o Graph-based Summary', each "
        "batch summarized into one node (Figure 2b); 'none': no summaries, the search walks the level-1 chunks.",
    )

    def window(self, context_window: int | None) -> int:
        """n_s for an LLM with this context window."""
        if self.n_s is not None:
            return self.n_s
        return min(8192, context_window or 8192)

    def search_budget(self, context_window: int | None) -> int:
        """Tokens the first-turn prompt may grow to: the window, within the LLM's context less the margin."""
        window = self.search_window if self.search_window is not None else self.window(context_window)
        if context_window:
            window = min(window, int(context_window * (1 - self.token_margin)))
        return window - self.answer_tokens

    def summary_budget(self, context_window: int | None) -> int:
        return self.summary_tokens if self.summary_tokens is not None else self.window(context_window) // 4
