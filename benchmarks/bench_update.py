"""What an update costs against a full build (issue 25): SiReRAG and K²RAG on pooled HotpotQA dev
passages. Builds the index without the last 10 passages, adds 1 of them, deletes it again, adds all
10 at once, and prints each change's LLM calls and seconds as a share of a full build's; retrieval
answer recall@10 on the pooled questions after the additions against a full rebuild over the same
passages (targets: +1 ≤ 10 % of the calls, +10 ≤ 30 %, −1 ≤ 10 %, recall within 0.02).

The LLM is a stand-in OpenAI-compatible server (``integrations_tests.openai_stub``: deterministic,
extractive replies, no delay) so the call counts are the methods' own and the run takes minutes; the
embeddings are the real ``st:default`` model, so recall means something. ``--llm`` runs it on a real
model instead (e.g. ``llamacpp:default``: hours for a full build of 100 passages).

    .venv/bin/python benchmarks/bench_update.py [--questions 10] [--methods sirerag,k2rag] [--llm SPEC]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_index.core import Document  # noqa: E402
from llama_index.core.indices.base import BaseIndex  # noqa: E402

from integrations_tests.openai_stub import SlotServer  # noqa: E402
from llama_index_k2rag import K2RAGIndex  # noqa: E402
from llama_index_sirerag import SiReRAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_embedding, llama_index_llm  # noqa: E402
from multihop_rag.corpus import Question, load_pooled  # noqa: E402
from multihop_rag.metrics import answer_recall_at_k  # noqa: E402

HELD_OUT = 10
BUILDERS = {"sirerag": SiReRAGIndex.from_documents, "k2rag": K2RAGIndex.from_documents}


def recall_at_10(index: BaseIndex, questions: list[Question]) -> float:
    retriever = index.as_retriever(similarity_top_k=10)
    hits = [answer_recall_at_k([h.node.get_content() for h in retriever.retrieve(q.question)], q.answers, 10)
            for q in questions]
    return sum(hits) / len(hits)


def measure(method: str, docs: list[Document], questions: list[Question], llm_spec: str, folder: Path) -> list[str]:
    llm, embed = llama_index_llm(llm_spec, max_tokens=512), llama_index_embedding("st:default")

    def full(name: str, subset: list[Document]) -> tuple[BaseIndex, int, float]:
        started = time.perf_counter()
        index = BUILDERS[method](subset, llm=llm, embed_model=embed, persist_dir=folder / name, show_progress=False)
        return index, int(index.stats()["llm"]["calls"]), time.perf_counter() - started

    rebuilt, calls, seconds = full("full", docs)
    index, _, _ = full("updated", docs[:-HELD_OUT])
    rows = [f"| {method} | full build, {len(docs)} passages | {calls} | 100 % | {seconds:.1f} | 100 % |"]
    # +1, then −1 of that passage (back to the base), then +10 at once: the index then holds what the rebuild holds.
    for change, apply in (("+1 passage", lambda: index.insert(docs[-HELD_OUT])),
                          ("−1 passage", lambda: index.delete_ref_doc(docs[-HELD_OUT].doc_id)),
                          (f"+{HELD_OUT} passages at once", lambda: index.insert(docs[-HELD_OUT:]))):
        apply()
        spent = index.last_update
        asked = spent["llm_calls"] + spent.get("cache_hits", 0)  # the +10 re-asks the +1's calls: counted
        rows.append(f"| {method} | {change} | {asked} | {asked / calls:.0%} | "
                    f"{spent['seconds']:.1f} | {spent['seconds'] / seconds:.0%} |")
    recall = (recall_at_10(index, questions), recall_at_10(rebuilt, questions))
    rows.append(f"| {method} | answer recall@10 after +{HELD_OUT}: updated / rebuilt | {recall[0]:.3f} / {recall[1]:.3f} "
                f"| Δ {recall[0] - recall[1]:+.3f} | | |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10, help="pool the candidates of this many dev questions")
    parser.add_argument("--methods", default="sirerag,k2rag")
    parser.add_argument("--llm", help="a model spec instead of the stand-in server")
    args = parser.parse_args()
    passages, questions = load_pooled("hotpotqa", n_questions=args.questions)
    docs = [p.to_llama_index() for p in passages]
    with tempfile.TemporaryDirectory() as tmp, SlotServer(slots=4, delay=0.0) as server:
        spec = args.llm or f"openai:stand-in@{server.url}"
        print(f"# bench_update: {len(docs)} pooled HotpotQA dev passages ({args.questions} questions), LLM {spec}, "
              f"embeddings st:default; {platform.machine()}, {os.cpu_count()} cores\n")
        print("| method | change | LLM calls | of a full build | seconds | of a full build |\n|---|---|---|---|---|---|")
        for method in args.methods.split(","):
            print("\n".join(measure(method, docs, questions, spec, Path(tmp) / method)), flush=True)


if __name__ == "__main__":
    main()
