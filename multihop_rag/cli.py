"""``multihop-rag index | ask | eval | demo``.

Exit codes: 0 done, 2 bad input (missing or unreadable corpus, unknown dataset, model server down
or without the model, empty store) with a one-line reason on stderr, 1 anything unexpected,
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from multihop_rag.backends import BackendError, Spec

METHODS = ("naive",)
"""Methods `index` and `ask` serve."""
EVAL_METHODS = ("naive", "raptor", "sirerag", "resp", "hirag", "garlic", "k2rag")
"""Methods `eval` runs (multihop_rag.runners.RUNNERS; not imported here to keep --help fast)."""
MANIFEST = "multihop_rag.json"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


class UsageError(ValueError):
    """Bad input from the command line."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _models(llm_spec: str | None, embed_spec: str | None):
    """Resolve and load the LLM and embedding model, saying what is used and how long it took."""
    from multihop_rag.backends import llama_index_embedding, llama_index_llm, resolve_embed_spec, resolve_llm_spec

    llm_s, embed_s = resolve_llm_spec(llm_spec), resolve_embed_spec(embed_spec)
    started = time.perf_counter()
    _say(f"loading models: llm={llm_s} embed={embed_s} …")
    llm, embed = llama_index_llm(str(llm_s)), llama_index_embedding(str(embed_s))
    _say(f"models ready in {time.perf_counter() - started:.1f} s")
    return llm, embed, llm_s, embed_s


def _manifest(store: str) -> dict:
    path = Path(store) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}


def _index(args: argparse.Namespace) -> int:
    from multihop_rag.corpus import LoadReport, load_documents
    from multihop_rag.naive import NaiveRAG

    report = LoadReport()
    passages = load_documents(args.corpus, report)
    _say(f"read {len(passages)} documents from {args.corpus} ({len(report.skipped)} skipped)")
    llm, embed, llm_s, embed_s = _models(args.llm, args.embed)
    started = time.perf_counter()
    rag = NaiveRAG.build(passages, llm=llm, embed_model=embed, store=args.store)
    if not str(args.store).startswith("http"):
        (Path(args.store) / MANIFEST).write_text(
            json.dumps({"method": args.method, "embed": str(embed_s), "documents": len(rag)}, indent=2)
        )
    print(f"indexed {len(rag)} documents into {args.store} in {time.perf_counter() - started:.1f} s")
    return 0


def _ask(args: argparse.Namespace) -> int:
    from multihop_rag.naive import NaiveRAG

    manifest = _manifest(args.store)
    if args.embed and manifest.get("embed") and args.embed != manifest["embed"]:
        raise UsageError(f"{args.store} was indexed with --embed {manifest['embed']}, not {args.embed}")
    llm, embed, _, _ = _models(args.llm, args.embed or manifest.get("embed"))
    rag = NaiveRAG.load(llm=llm, embed_model=embed, store=args.store, similarity_top_k=args.top_k)
    _print_answer(rag.answer(args.question))
    return 0


def _print_answer(answer) -> None:
    print(f"\nQ: {answer.question}\nA: {answer.text}   ({answer.seconds:.1f} s)")
    for e in answer.evidence:
        print(f"   [{e.score:.2f}] {e.title}: {e.text[:110]}{'…' if len(e.text) > 110 else ''}")


def garlic_attention_spec(option: str, llm_spec: Spec) -> str | None:
    """GARLIC's attention model for ``--attention-model option``: ``auto`` is the LLM's own GGUF
    (llama.cpp) or none (Ollama). Part of an eval folder's setting whichever methods a run names,
    so adding or re-running methods in the folder is never mistaken for another setting."""
    if option == "none":
        return None
    if option == "auto":
        return llm_spec.name if llm_spec.kind == "llamacpp" else None
    return option


def _eval_models(args: argparse.Namespace, out: Path, methods: list[str]):
    """Models for an evaluation: one LLM-call cache in ``out`` for both frameworks, usage counted."""
    from multihop_rag import backends
    from multihop_rag.cache import CachedLLM, LLMCache, UsageCallback
    from multihop_rag.runners import Models

    llm_s, embed_s = backends.resolve_llm_spec(args.llm), backends.resolve_embed_spec(args.embed)
    attention = garlic_attention_spec(args.attention_model, llm_s)
    load_attention = attention is not None and "garlic" in methods
    started = time.perf_counter()
    _say(f"loading models: llm={llm_s} embed={embed_s}" + (f" attention={attention}" if load_attention else "") + " …")
    out.mkdir(parents=True, exist_ok=True)
    cache = LLMCache(out / "llm_calls.sqlite")
    models = Models(
        llm=CachedLLM(inner=backends.llama_index_llm(str(llm_s)), cache=cache),
        embed=backends.llama_index_embedding(str(embed_s)),
        chat=backends.chat_model(str(llm_s), cache=cache),
        lc_embed=backends.langchain_embeddings(str(embed_s)),
    )
    models.chat.callbacks = [UsageCallback(models.chat_usage)]
    if load_attention:
        from llama_index_garlic.attention import load_attention_model

        models.attention = load_attention_model(attention)
    _say(f"models ready in {time.perf_counter() - started:.1f} s")
    return models, llm_s, embed_s, attention


def _eval(args: argparse.Namespace) -> int:
    from multihop_rag.corpus import load_dataset, load_pooled
    from multihop_rag.evaluate import evaluate
    from multihop_rag.runners import RUNNERS, make_runner

    methods = list(dict.fromkeys(m.strip() for m in args.methods.split(",") if m.strip()))
    unknown = [m for m in methods if m not in RUNNERS]
    if unknown or not methods:
        raise UsageError(f"unknown method(s): {', '.join(unknown) or '(none given)'} (available: {', '.join(RUNNERS)})")
    if args.split == "dev":
        passages, questions = load_pooled(args.dataset, args.pool, args.data_dir)
        corpus = f"candidates of the first {args.pool} dev questions, pooled"
    else:
        passages, questions = load_dataset(args.dataset, args.split, args.data_dir)
        corpus = "smoke corpus"
    if not passages:
        raise UsageError(
            f"{args.dataset} has no corpus here: every method retrieves from a corpus, so none can run on it"
        )
    questions = questions[: args.limit] if args.limit else questions
    out = Path(args.out)
    models, llm_s, embed_s, attention = _eval_models(args, out, methods)
    setting = {"dataset": args.dataset, "split": args.split, "corpus": corpus, "passages": len(passages),
               "llm": str(llm_s), "embed": str(embed_s), "garlic_attention": str(attention) if attention else None,
               "garlic_n_s": args.garlic_n_s}
    runners = [make_runner(m, garlic_n_s=args.garlic_n_s) for m in methods]
    evaluate(runners, passages, questions, models, out, setting)
    print((out / "report.md").read_text())
    print(f"results: {out / 'results.jsonl'}\nreport: {out / 'report.md'}, {out / 'report.png'}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from multihop_rag.corpus import load_demo
    from multihop_rag.metrics import exact_match
    from multihop_rag.naive import NaiveRAG

    passages, questions = load_demo()
    store = args.store or tempfile.mkdtemp(prefix="multihop-rag-demo-")
    _say(f"demo corpus: {len(passages)} passages about the (fictional) country of Astrel; store: {store}")
    llm, embed, llm_s, embed_s = _models(args.llm, args.embed)
    started = time.perf_counter()
    rag = NaiveRAG.build(passages, llm=llm, embed_model=embed, store=store, similarity_top_k=args.top_k)
    _say(f"indexed {len(rag)} passages in {time.perf_counter() - started:.1f} s (method: naive dense retrieval)")
    correct = 0
    for q in questions:
        answer = rag.answer(q.question)
        _print_answer(answer)
        hit = exact_match(answer.text, q.answers) or any(a.lower() in answer.text.lower() for a in q.answers)
        correct += bool(hit)
        print(f"   gold: {q.answers[0]}  {'✓' if hit else '✗'}")
    print(f"\n{correct}/{len(questions)} answered correctly with llm={llm_s}, embed={embed_s}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="multihop-rag",
        description="Multi-hop RAG methods on local models. Models: --llm ollama:<model> | llamacpp:<alias|file.gguf>; "
        "--embed st:<alias|dir> | ollama:<model>. Without them: $MULTIHOP_RAG_LLM / $MULTIHOP_RAG_EMBED, "
        "then Ollama if it answers and has the model, else the embedded models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details and warnings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def models(p: argparse.ArgumentParser) -> None:
        p.add_argument("--llm", help="LLM spec, e.g. ollama:qwen2.5:7b-instruct or llamacpp:default")
        p.add_argument("--embed", help="embedding spec, e.g. st:default or ollama:nomic-embed-text")

    p = sub.add_parser("index", help="index a folder of .txt/.md files or a .jsonl corpus")
    p.add_argument("corpus", help="folder of .txt/.md files, or a JSONL file of {id, title, text}")
    p.add_argument("--store", required=True, help="folder for the index (created), or a Chroma server URL")
    p.add_argument("--method", choices=METHODS, default="naive", help="indexing method (default: naive)")
    models(p)
    p.set_defaults(run=_index)

    p = sub.add_parser("ask", help="answer a question from an index built with 'index'")
    p.add_argument("question", help="the question")
    p.add_argument("--store", required=True, help="the index folder (or Chroma server URL) given to 'index'")
    p.add_argument("--method", choices=METHODS, default="naive", help="method the index was built with")
    p.add_argument("--top-k", type=int, default=5, help="passages retrieved (default: 5)")
    models(p)
    p.set_defaults(run=_ask)

    p = sub.add_parser("eval", help="score methods on a multi-hop QA dataset")
    p.add_argument("--dataset", required=True, help="musique, hotpotqa, 2wikimultihopqa, bamboogle or multihoprag")
    p.add_argument("--split", default="smoke", choices=("smoke", "dev"), help="data split (default: smoke)")
    p.add_argument("--methods", default="naive", help=f"comma-separated methods (available: {', '.join(EVAL_METHODS)})")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--pool", type=int, default=30, help="dev split: the corpus pools the candidates of this many questions (default: 30)")
    p.add_argument("--out", default="out/eval", help="output folder: indexes, results.jsonl, report.md, report.png (default: out/eval)")
    p.add_argument("--data-dir", help="dataset folder (default: $MULTIHOP_RAG_DATA or shared/data)")
    p.add_argument("--attention-model", default="auto", help="GARLIC's attention model: auto (the llamacpp GGUF "
                   "through transformers; none for Ollama), none (embedding fallback), or a GGUF file / HF model dir")
    p.add_argument("--garlic-n-s", type=int, help="GARLIC's summary batch length in tokens (default: the paper's 8K, "
                   "capped by the LLM's context; about 2048 suits 0.5B-1.5B models)")
    models(p)
    p.set_defaults(run=_eval)

    p = sub.add_parser("demo", help="index a bundled 15-passage corpus and answer three two-hop questions")
    p.add_argument("--store", help="index folder (default: a new temporary folder)")
    p.add_argument("--top-k", type=int, default=4, help="passages retrieved (default: 4)")
    models(p)
    p.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from multihop_rag.corpus import CorpusError
    from multihop_rag.stores import StoreError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except (CorpusError, BackendError, StoreError, UsageError) as exc:
        _say(f"multihop-rag {args.command}: {exc}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
