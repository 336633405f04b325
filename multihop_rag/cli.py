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
from importlib import resources
from pathlib import Path

from multihop_rag.backends import BackendError

METHODS = ("naive",)
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


def _eval(args: argparse.Namespace) -> int:
    from multihop_rag.corpus import load_dataset
    from multihop_rag.evaluate import run, summarize
    from multihop_rag.naive import NaiveRAG

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise UsageError(f"unknown or not yet available method(s): {', '.join(unknown)} (available: {', '.join(METHODS)})")
    passages, questions = load_dataset(args.dataset, args.split, args.data_dir)
    if not passages:
        raise UsageError(f"{args.dataset} has no corpus here: corpus-based methods cannot run on it")
    questions = questions[: args.limit] if args.limit else questions
    out = Path(args.out)
    llm, embed, llm_s, embed_s = _models(args.llm, args.embed)
    rag = NaiveRAG.build(passages, llm=llm, embed_model=embed, store=out / "store" / f"{args.dataset}-{args.split}")
    results = run("naive", rag.answer, questions, out)
    summary = summarize(results)
    print(f"\n{args.dataset}/{args.split}, llm={llm_s}, embed={embed_s}")
    print("| method | n | EM | F1 | answer recall@5 | s/question |\n|---|---|---|---|---|---|")
    print(
        f"| naive | {summary['n']} | {summary['em']:.3f} | {summary['f1']:.3f} | "
        f"{summary['answer_recall']:.3f} | {summary['seconds']:.1f} |"
    )
    print(f"results: {out / 'results.jsonl'}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from multihop_rag.corpus import load_documents
    from multihop_rag.metrics import exact_match
    from multihop_rag.naive import NaiveRAG

    data = resources.files("multihop_rag") / "data"
    with resources.as_file(data / "demo_corpus.jsonl") as corpus_path:
        passages = load_documents(corpus_path)
    questions = [json.loads(line) for line in (data / "demo_questions.jsonl").read_text().splitlines()]
    store = args.store or tempfile.mkdtemp(prefix="multihop-rag-demo-")
    _say(f"demo corpus: {len(passages)} passages about the (fictional) country of Astrel; store: {store}")
    llm, embed, llm_s, embed_s = _models(args.llm, args.embed)
    started = time.perf_counter()
    rag = NaiveRAG.build(passages, llm=llm, embed_model=embed, store=store, similarity_top_k=args.top_k)
    _say(f"indexed {len(rag)} passages in {time.perf_counter() - started:.1f} s (method: naive dense retrieval)")
    correct = 0
    for q in questions:
        answer = rag.answer(q["question"])
        _print_answer(answer)
        hit = exact_match(answer.text, q["answers"]) or any(a.lower() in answer.text.lower() for a in q["answers"])
        correct += bool(hit)
        print(f"   gold: {q['answers'][0]}  {'✓' if hit else '✗'}")
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
    p.add_argument("--methods", default="naive", help=f"comma-separated methods (available: {', '.join(METHODS)})")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--out", default="out/eval", help="output folder: results.jsonl and the store (default: out/eval)")
    p.add_argument("--data-dir", help="dataset folder (default: $MULTIHOP_RAG_DATA or shared/data)")
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
