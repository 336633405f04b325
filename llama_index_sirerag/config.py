"""SiReRAG's knobs, with the paper's defaults and the ablation switches of Table 5."""

from __future__ import annotations

from pydantic import BaseModel, Field

from multihop_rag.indexing.clustering import ClusterConfig


class SiReRAGConfig(BaseModel):
    """How a SiReRAG index is built. ``relatedness=False`` is plain RAPTOR (the paper's baseline)."""

    model_config = {"frozen": True, "extra": "forbid"}  # a misspelt setting is refused, not ignored

    chunk_size: int = Field(1024, description="Token size of leaf chunks (SentenceSplitter, the RAPTOR pack's default).")
    chunk_overlap: int = Field(200, description="Token overlap of leaf chunks.")
    tree_depth: int = Field(3, description="Summary levels above the leaves: 4 levels in all (RAPTOR pack's tree_depth).")
    max_cluster_tokens: int = Field(
        3500,
        description="Re-cluster clusters above this many tokens (RAPTOR: 3500; the authors' pack uses 10,000, "
        "more than a small model's context).",
    )
    summary_sentences: int | None = Field(
        None,
        ge=1,
        description="Each summary is stopped after this many sentences, the rest never generated (ours, standing for "
        "RAPTOR's reference code, which caps a summary at summarization_length=100 tokens and keeps the cut "
        "sentence; about three of the 1.5B's sentences). None: no bound, as the LlamaIndex RAPTOR pack SiReRAG's "
        "authors built on (Appendix F).",
    )
    cluster_dim: int = Field(10, description="UMAP dimension for clustering.")
    cluster_threshold: float = Field(0.1, description="GMM soft-assignment threshold.")
    seed: int = Field(224, description="Seed of UMAP and the GMMs (RAPTOR's).")
    relatedness: bool = Field(True, description="Build the relatedness tree; False gives plain RAPTOR.")
    relatedness_summaries: bool = Field(True, description="Recursive summaries on the relatedness tree (ablation A: False).")
    max_aggregate_tokens: int | None = Field(
        200,
        ge=16,
        description="Cut an entity's propositions, in corpus order, into aggregates of at most this many tokens "
        "(None: one unbounded aggregate per entity, §4.2 and the authors' code). all-MiniLM-L6-v2 reads 256 word "
        "pieces: the rest of a longer aggregate was never embedded, and a common entity's aggregate grows with the "
        "corpus (issue 42).",
    )
    drop_common_noun_entities: bool = Field(
        True,
        description="Group propositions by named entities only: a name without a capital letter or a digit "
        "(\"drummer\", \"director\") is dropped (ours; False: every extracted entity, as §4.2 and Figure 3, which "
        "exclude common nouns by the prompt alone, a request the 1.5B does not follow; on HotpotQA's tuning pool "
        "F1 0.442 → 0.590, 4 answers better and none worse; issue 41).",
    )
    max_entity_share: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Drop hub entities, mentioned in more than this share of the chunks (and in at least 5), whose "
        "aggregates gather unrelated propositions (ours; None: every entity, §4.2).",
    )
    proposition_titles: bool = Field(
        False,
        description="Each proposition in the relatedness tree starts with its passage's title (\"Caldor: It lies on "
        "the Sable River\") unless it names it already (ours: §4.2 asks for self-contained propositions, but the "
        "1.5B leaves subjects as pronouns, which name nobody in an aggregate gathered by another entity; issue 41).",
    )
    compare_years: bool = Field(
        True,
        description="A question naming two options and an order in time (\"Who was born first, X or Y?\", \"Who "
        "lived longer?\") is answered by the years the retrieved nodes give each option, when both have one and they "
        "differ, instead of by the reader (ours, as ReSP's and HiRAG's compare_years; not for dates a hop behind each "
        "option, \"the director born earlier\"). On 2Wiki's tuning pool it decided 3 of 4 such questions, each right, "
        "one the reader had wrong (issue 41). False: §5.4's reader answers every question.",
    )
    compare_quantities: bool = Field(
        True,
        description="A question naming two options and one direction of amount (\"Which mountain is taller, X or "
        "Y?\", \"Which band has released more albums?\") is answered by the numbers the retrieved nodes give each "
        "option, a line each, when both give one in the same unit and they differ, instead of by the reader (ours, as "
        "ReSP's and HiRAG's compare_quantities). False: §5.4's reader answers every question.",
    )
    top_k: int = Field(20, ge=1, description="Pool nodes a query retrieves for the reader (§5.4: the top 20 candidates).")
    reader_tokens: int = Field(
        0,
        ge=0,
        description="0: the reader reads the top_k nodes (§5.4); more: the top_k in rank order while they fit this "
        "many tokens (ours: the 1.5B reads ~2,970 tokens of top 20 on HotpotQA, four times naive's five chunks; "
        "issue 41).",
    )
    index_propositions: bool = Field(False, description="Also put every proposition in the pool (ablation B: True).")
    aggregates: bool = Field(
        True, description="Proposition aggregates as the relatedness leaves (ablation C: False, with index_propositions)."
    )
    dual_clustering_on_chunks: bool = Field(
        False, description="Ablation E: no relatedness tree; entity-mention clusters of chunks join the similarity tree."
    )
    coreference_rewrite: bool = Field(False, description="Rewrite chunks to resolve coreferences first (Figure 6); slow.")
    max_propositions: int = Field(30, description="Most propositions extracted per chunk (JSON schema maxItems).")
    max_entities: int = Field(10, description="Most entities per proposition (JSON schema maxItems).")

    @property
    def method_name(self) -> str:
        """``raptor`` without the relatedness tree, else ``sirerag`` (the name its index folder records)."""
        return "sirerag" if self.relatedness else "raptor"

    def clustering(self) -> ClusterConfig:
        return ClusterConfig(
            dim=self.cluster_dim,
            threshold=self.cluster_threshold,
            max_cluster_tokens=self.max_cluster_tokens,
            seed=self.seed,
        )
