"""``multihop-rag index | ask | eval | demo``.

Methods are found through the entry-point group ``multihop_rag.methods`` (:mod:`multihop_rag.app.registry`):
this module imports no method package. Exit codes: 0 done, 2 bad input (a missing or unreadable
corpus, an unknown method, dataset or setting, a model server that is down or lacks the model, a
Chroma server that does not answer, a store built with another method or models) with a one-line
reason on stderr, 1 anything unexpected, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from multihop_rag.app import registry
from multihop_rag.app.evaluate import Entry, collect, evaluate
from multihop_rag.app.report import summary_markdown, write_report
from multihop_rag.app.speed import measure_speed
from multihop_rag.corpus import LoadReport, load_dataset, load_demo, load_documents, load_pooled, load_questions
from multihop_rag.errors import CorpusError, MultihopRagError, StoreError, UsageError
from multihop_rag.indexing.persistence import (
    MANIFEST,
    read_manifest,
    readable_store,
    reset_store,
    store_lock,
    undo_cut_update,
    undoable_update,
    write_atomic,
    write_manifest,
)
from multihop_rag.llm.cache import model_identity
from multihop_rag.method import Models
from multihop_rag.metrics import accuracy
from multihop_rag.stores import forget_chroma_clients, is_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")



def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _models(args: argparse.Namespace, cache: Path | None = None) -> Any:
    """The models of a run, counted; with ``cache`` their calls are kept there (the store's own cache)."""
    started = time.perf_counter()
    _say("loading models …")
    models = args.opened.enter_context(  # closed when the command ends: its call cache whole on disk
        Models.from_specs(args.llm, args.embed, cache=cache, max_concurrency=args.max_concurrency))
    _say(f"models ready in {time.perf_counter() - started:.1f} s: llm={models.llm_spec} embed={models.embed_spec} "
         f"({models.max_concurrency} LLM calls in flight at most)")
    return models


def _method(name: str, assignments: list[str]) -> tuple[Any, Any]:
    method = registry.get(name)
    return method, registry.settings_for(method, assignments)


def _store_folder(store: str) -> Path:
    if is_server(store):
        raise UsageError(f"--store takes a folder for the index's files; {store} is a URL")
    return Path(store).expanduser()


def _index(args: argparse.Namespace) -> int:
    report = LoadReport()
    passages = load_documents(args.corpus, report)
    _say(f"read {len(passages)} documents from {args.corpus} ({len(report.skipped)} skipped)")
    folder = _store_folder(args.store)
    registry.check_settings(args.set)
    if args.estimate:
        return _index_locked(args, passages, folder)
    with store_lock(folder, say=_say):  # two runs on one store: the second waits, then updates what the first wrote
        return _index_locked(args, passages, folder)


def _index_locked(args: argparse.Namespace, passages: list[Any], folder: Path) -> int:
    if args.overwrite and not args.estimate:
        reset_store(folder)  # from nothing, whatever a crash or a damaged file left there
    elif undo_cut_update(folder):
        _say(f"{folder}: the last update did not finish and was undone; this run makes it again (its finished LLM "
             "calls replay from the cache)")
    existing = read_manifest(folder) if (folder / MANIFEST).is_file() else None
    method_name = args.method or (existing or {}).get("cli_method") or "naive"
    method, config = _method(method_name, args.set)
    updating = existing is not None and existing.get("status") == "done" and not args.overwrite
    if existing is not None and updating:
        _check_same(existing, method_name, args)
        config = _recorded_settings(method, existing, args.set)
    if args.estimate:
        return _print_estimate(method, config, passages, _models(args), args.recalibrate)
    try:
        models = _models(args, cache=folder / "llm_calls.sqlite")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"the LLM-call cache {folder / 'llm_calls.sqlite'} is damaged ({exc}): delete it (the build then "
                         "makes its calls again) or rebuild with --overwrite, which sets it aside") from exc
    if not updating and not _confirm_build(method, config, passages, models, args.yes):
        _say("not built")
        return 1
    if updating and not _confirm_removal(folder, passages, args):
        _say("not updated")
        return 1
    started, before = time.perf_counter(), models.usage()
    if updating:
        try:
            with undoable_update(folder):  # cut half-way, the store goes back to its last finished index
                index = _load(method, folder, models, config)
                change = index.update(passages)
                write_atomic(folder / CORPUS_IDS, json.dumps([p.id for p in passages]))
        except BaseException:
            forget_chroma_clients()
            raise
        spent = models.usage() - before
        print(f"updated {folder}: {len(change.added)} added, {len(change.changed)} changed, {len(change.removed)} removed; "
              f"{spent.calls} LLM calls ({spent.cache_hits} from the cache) in {time.perf_counter() - started:.1f} s")
        return 0
    index = method.build(passages, models, folder, config, overwrite=args.overwrite)
    write_atomic(folder / CORPUS_IDS, json.dumps([p.id for p in passages]))
    written = read_manifest(folder)
    write_manifest(folder, written["method"], written["format"], cli_method=method_name,
                   llm=models.llm_spec, embed=models.embed_spec, settings=config.model_dump(mode="json"))
    spent = models.usage() - before
    print(f"indexed {len(passages)} documents with {method_name} into {folder} in {time.perf_counter() - started:.1f} s "
          f"({spent.calls} LLM calls, {spent.cache_hits} from the cache; pool of {index.stats().get('pool_size')})")
    return 0


def _estimate(method: Any, config: Any, passages: list[Any], models: Any, recalibrate: bool = False) -> tuple[Any, Any] | None:
    """The build's estimate and the model's measured speed (measured again with ``recalibrate``), or None
    for a method without LLM calls to build."""

    if not getattr(method, "builds", False) or not hasattr(method, "estimate"):
        return None
    estimate = method.estimate(passages, models, config)
    identity = f"{models.llm_spec} {model_identity(models.llm.inner).get('digest') or ''} cpus={os.cpu_count()}"
    return estimate, measure_speed(models.llm.inner, identity, refresh=recalibrate)


def _print_estimate(method: Any, config: Any, passages: list[Any], models: Any, recalibrate: bool) -> int:
    found = _estimate(method, config, passages, models, recalibrate)
    if found is None:
        print(f"{method.name}: no LLM call to build {len(passages)} documents (embeddings only)")
        return 0
    estimate, speed = found
    print(f"{method.name} on {estimate.documents} documents ({estimate.corpus_tokens} tokens), llm={models.llm_spec}: "
          f"measured {speed.prompt_tps:.0f} prompt and {speed.generate_tps:.1f} generated tokens/s, one call at a time\n")
    print(estimate.table(speed))
    for note in estimate.notes:
        print(f"\n{note}")
    return 0


def _confirm_build(method: Any, config: Any, passages: list[Any], models: Any, yes: bool) -> bool:
    """Print the estimate of a build; one over an hour asks for confirmation in a terminal (``--yes`` skips)."""
    found = _estimate(method, config, passages, models)
    if found is None:
        return True
    estimate, speed = found
    seconds = estimate.seconds(speed)
    _say(f"estimate: {estimate.calls} LLM calls, {estimate.prompt_tokens} prompt + {estimate.completion_tokens} "
         f"generated tokens, about {seconds / 60:.0f} min at this model's measured speed")
    if seconds <= 3600 or yes or not sys.stdin.isatty():
        return True
    return input(f"build for about {seconds / 3600:.1f} h? [y/N] ").strip().lower() in {"y", "yes"}


CORPUS_IDS = "corpus_ids.json"
"""The ids of the documents the store was last built or updated from (the command line's record)."""


def _confirm_removal(folder: Path, passages: list[Any], args: argparse.Namespace) -> bool:
    """An update that would remove more than half of the store's documents (a corpus path given too narrowly) asks
    first in a terminal and is refused elsewhere, unless ``--yes``."""
    try:
        known = set(json.loads((folder / CORPUS_IDS).read_text()))
    except (OSError, ValueError):
        return True  # a store from before this record: nothing to compare with
    removed = known - {p.id for p in passages}
    if len(removed) * 2 <= len(known) or args.yes:
        return True
    what = f"this update would remove {len(removed)} of the store's {len(known)} documents ({args.corpus} holds {len(passages)})"
    if not sys.stdin.isatty():
        raise UsageError(f"{what}: pass --yes to remove them, or give the whole corpus")
    return input(f"{what}. Remove them? [y/N] ").strip().lower() in {"y", "yes"}


def _load(method: Any, folder: Path, models: Any, config: Any) -> Any:
    """``method.load``; a store whose files are missing, cut or unreadable is named with its fix in one line."""
    try:
        return method.load(folder, models, config)
    except StoreError:
        raise
    except (OSError, ValueError, KeyError, sqlite3.DatabaseError) as exc:  # JSONDecodeError is a ValueError
        part = getattr(exc, "filename", None) or getattr(getattr(exc, "doc", None), "name", None)
        where = f" ({part})" if part else ""
        raise StoreError(f"{folder} is damaged{where}: {type(exc).__name__}: {str(exc)[:160]}; rebuild it with "
                         f"'multihop-rag index CORPUS --store {folder} --overwrite' (the LLM-call cache is kept)") from exc


def _recorded_settings(method: Any, manifest: dict[str, Any], assignments: list[str]) -> Any:
    """The settings a store was built with; an update keeps them (a ``--set`` that changes one is refused: an index
    built one way and updated another would mix both)."""

    recorded = manifest.get("settings") or {}
    stored = registry.settings_for(method, [], base=recorded)
    asked = registry.settings_for(method, assignments, base=recorded)
    changed = [f"{method.name}.{k}={v!r}" for k, v in asked.model_dump().items() if stored.model_dump()[k] != v]
    if changed:
        raise UsageError(f"the store was built with other settings than {', '.join(changed)}: an update keeps the "
                         "store's settings; rebuild with --overwrite to change them")
    return stored


def _check_same(manifest: dict[str, Any], method: str, args: argparse.Namespace) -> None:
    """An index is used with the method and models it was built with (a flag saying otherwise is refused)."""
    built = manifest.get("cli_method")
    if built and method != built:
        raise UsageError(f"the store was built with --method {built}, not {method}: use {built}, or --overwrite")
    for flag, key in (("llm", "llm"), ("embed", "embed")):
        given, recorded = getattr(args, flag), manifest.get(key)
        if given and recorded and given != recorded:
            raise UsageError(f"the store was built with --{flag} {recorded}, not {given}: omit --{flag}, or rebuild (--overwrite)")


def _print_event(event: dict[str, Any]) -> None:
    step = event.get("step", "")
    details = "  ".join(f"{k}={_short(v)}" for k, v in event.items() if k != "step" and v not in (None, "", []))
    print(f"  [{step}] {details}", flush=True)


def _short(value: Any, width: int = 140) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ask(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise UsageError("an empty question: write the question to answer, in quotes")
    with readable_store(_store_folder(args.store)) as folder:  # never a half-updated store; a read-only one as a copy
        return _ask_store(args, folder)


def _ask_store(args: argparse.Namespace, folder: Path) -> int:
    manifest = read_manifest(folder)
    built = manifest.get("cli_method") or manifest["method"]
    method_name = args.method or built
    over_retriever = method_name == "resp" and built != "resp"
    if not over_retriever:
        _check_same(manifest, method_name, args)
    args.llm = args.llm or manifest.get("llm")
    args.embed = args.embed or manifest.get("embed")
    models = _models(args, cache=None)

    store_method = registry.get(built)
    # the store's recorded settings, with the --set items naming its method on top (query-time settings such
    # as resp.max_iterations or garlic.stop_patience; a build-time one changes nothing already built)
    store_config = registry.settings_for(store_method, args.set, base=manifest.get("settings", {}))
    index = _load(store_method, folder, models, store_config)
    if over_retriever:
        if not hasattr(index, "as_langchain_retriever"):
            raise UsageError(f"a {built} index offers no retriever for ReSP: ask it with --method {built}")
        resp, config = _method("resp", args.set)
        index = resp.over(index.as_langchain_retriever(config.top_k), models, config)
    trace = _print_event if args.trace and not args.json else None
    answer = index.answer(args.question, trace=trace)
    if args.json:
        from dataclasses import asdict

        print(json.dumps({"method": method_name, **asdict(answer)}, default=str))
        return 0
    print(f"\nQ: {answer.question}\nA: {answer.text}   ({answer.seconds:.1f} s, {method_name})")
    for e in answer.evidence[: args.top_k]:
        print(f"   [{e.score:.2f}] {e.kind} {e.title}: {_short(e.text, 110)}")
    return 0


def _entry(name: str, names: list[str], assignments: list[str]) -> Entry:
    """One ``--methods`` item: a method, or ``naive@M``: naive RAG reading as many tokens as method M's evidence."""
    control, _, measured = name.partition("@")
    method, config = _method(control, assignments)
    if not measured:
        return Entry(method, config)
    if control != "naive":
        raise UsageError(f"{name}: the control at a method's reading budget is naive RAG: naive@{measured}")
    if measured not in names[: names.index(name)]:
        raise UsageError(f"{name} reads as much as {measured}'s evidence: list {measured} before it in --methods")
    return Entry(method, config, budget_of=measured)


def _eval(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(m.strip() for m in args.methods.split(",") if m.strip()))
    if not names:
        raise UsageError("--methods names no method")
    entries = [_entry(name, names, args.set) for name in names]
    if args.questions:
        if not args.corpus:
            raise UsageError("--questions needs --corpus (the documents to retrieve from)")
        passages = load_documents(args.corpus, LoadReport())
        questions = load_questions(args.questions)
        dataset, corpus = Path(args.questions).name, f"{args.corpus} ({len(passages)} documents)"
    elif args.split == "dev":
        passages, questions = load_pooled(args.dataset, args.pool, args.data_dir, start=args.start)
        first = "the first" if not args.start else f"questions {args.start + 1}–{args.start + args.pool}:"
        dataset, corpus = args.dataset, f"candidates of {first} {args.pool} dev questions, pooled"
    else:
        passages, questions = load_dataset(args.dataset, args.split, args.data_dir)
        dataset, corpus = args.dataset, "smoke corpus"
    if not passages:
        raise CorpusError(f"{dataset} has no corpus here: every method retrieves from a corpus, so none can run on it")
    questions = questions[: args.limit] if args.limit else questions
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = _models(args, cache=out / "llm_calls.sqlite")
    setting = {"dataset": dataset, "split": "custom" if args.questions else args.split, "corpus": corpus,
               "passages": len(passages), "llm": models.llm_spec, "embed": models.embed_spec}
    evaluate(entries, passages, questions, models, out, setting)
    print((out / "report.md").read_text(encoding="utf-8"))
    print(f"results: {out / 'results.jsonl'}\nreport: {out / 'report.md'}, {out / 'report.png'}")
    return 0


def _report(args: argparse.Namespace) -> int:
    evaluations = []
    for folder in map(Path, args.folders):
        if not (folder / "eval.json").exists():
            raise UsageError(f"{folder} holds no evaluation (no eval.json): give folders written by 'eval --out'")
        setting = json.loads((folder / "eval.json").read_text())
        results, builds = collect(folder)
        write_report(folder, results, builds, setting)
        evaluations.append((setting, results))
        print(f"report: {folder / 'report.md'}, {folder / 'report.png'}")
    summary = summary_markdown(evaluations)
    if args.summary:
        Path(args.summary).write_text(summary, encoding="utf-8")
    print(summary)
    return 0


def _demo(args: argparse.Namespace) -> int:
    passages, questions = load_demo()
    questions = questions[: args.limit]
    names = ["naive", "resp", "hirag"] if args.methods == "default" else [m.strip() for m in args.methods.split(",") if m.strip()]
    if "all" in names:
        names = list(registry.available())
    root = Path(args.store or tempfile.mkdtemp(prefix="multihop-rag-demo-"))
    _say(f"demo corpus: {len(passages)} passages about the (fictional) country of Astrel; methods: {', '.join(names)}; store: {root}")
    models = _models(args, cache=root / "llm_calls.sqlite")
    table = []
    for name in names:
        method, config = _method(name, args.set)
        started = time.perf_counter()
        index = method.build(passages, models, root / name, config, overwrite=True)
        _say(f"{name}: built in {time.perf_counter() - started:.1f} s")
        for q in questions:
            before = models.usage()
            print(f"\n[{name}] Q: {q.question}")
            answer = index.answer(q.question, trace=_print_event if not args.quiet else None)
            spent = models.usage() - before
            ok = accuracy(answer.text, q.answers) == 1.0
            print(f"[{name}] A: {answer.text}   gold: {q.answers[0]} {'✓' if ok else '✗'}  ({answer.seconds:.1f} s, {spent.calls + spent.cache_hits} LLM calls)")
            table.append((name, q.id, ok, answer.seconds, spent.calls + spent.cache_hits))
    print("\n| method | correct | s / question | LLM calls / question |\n|---|---|---|---|")
    for name in names:
        rows = [r for r in table if r[0] == name]
        print(f"| {name} | {sum(r[2] for r in rows)}/{len(rows)} | {sum(r[3] for r in rows) / len(rows):.1f} | "
              f"{sum(r[4] for r in rows) / len(rows):.1f} |")
    print(f"\nllm={models.llm_spec}, embed={models.embed_spec}")
    return 0


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="multihop-rag",
        description="Multi-hop RAG methods on local models. Models: --llm ollama:<model> | llamacpp:<alias|file.gguf>; "
        "--embed st:<alias|dir> | ollama:<model>. Without them: $MULTIHOP_RAG_LLM / $MULTIHOP_RAG_EMBED, "
        "then Ollama if it answers and has the model, else the embedded models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details and warnings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--llm", help="LLM spec, e.g. ollama:qwen2.5:7b-instruct or llamacpp:default")
        p.add_argument("--embed", help="embedding spec, e.g. st:default or ollama:nomic-embed-text")
        p.add_argument("--max-concurrency", type=int, help="LLM calls in flight at most (default: the server's "
                       "parallel slots where it reports them, 4 for Ollama, 1 for the in-process model)")
        p.add_argument("--set", action="append", default=[], metavar="METHOD.FIELD=VALUE",
                       help="a method setting, e.g. --set garlic.n_s=2048 (repeatable)")

    p = sub.add_parser("index", help="index a folder of .txt/.md files or a .jsonl corpus (again: update it)")
    p.add_argument("corpus", help="folder of .txt/.md files, or a JSONL file of {id, title, text}")
    p.add_argument("--store", required=True, help="folder for the index (created); an existing index there is updated")
    p.add_argument("--method", help="naive, raptor, sirerag, k2rag, garlic, hirag or a registered one (default: naive, "
                   "or the store's)")
    p.add_argument("--overwrite", action="store_true", help="replace the store's index instead of updating it")
    p.add_argument("--estimate", action="store_true", help="print the build's LLM calls, tokens and time, and build nothing "
                   "(measures the model's speed once: ~20 s)")
    p.add_argument("--recalibrate", action="store_true", help="with --estimate: measure the model's speed again (do it "
                   "on an idle machine; the kept speed serves every later estimate)")
    p.add_argument("--yes", action="store_true", help="build without asking, even when the estimate is over an hour")
    common(p)
    p.set_defaults(run=_index)

    p = sub.add_parser("ask", help="answer a question from an index built with 'index'")
    p.add_argument("question", help="the question")
    p.add_argument("--store", required=True, help="the index folder given to 'index'")
    p.add_argument("--method", help="the store's method (default), or resp: ReSP over the store's retriever")
    p.add_argument("--top-k", type=int, default=5, help="evidence shown (default: 5)")
    p.add_argument("--trace", action="store_true", help="print each reasoning step as it happens")
    p.add_argument("--json", action="store_true", help="print one JSON result")
    common(p)
    p.set_defaults(run=_ask)

    p = sub.add_parser("eval", help="score methods on a multi-hop QA dataset, or on your own questions")
    p.add_argument("--dataset", default="hotpotqa", help="musique, hotpotqa, 2wikimultihopqa, bamboogle or multihoprag")
    p.add_argument("--split", default="smoke", choices=("smoke", "dev"), help="data split (default: smoke)")
    p.add_argument("--questions", help="your own questions: a JSONL of {question, answers[, supporting_titles]}")
    p.add_argument("--corpus", help="with --questions: the documents (a folder of .txt/.md or a .jsonl)")
    p.add_argument("--methods", default="naive", help="comma-separated methods; naive@M: naive RAG reading as many tokens as M's evidence (after M)")
    p.add_argument("--limit", type=_positive_int, help="only the first N questions")
    p.add_argument("--start", type=int, default=0, help="dev split: the questions and the pool begin after this many "
                   "(100: the tuning questions 101–200; report on the first 100, never tune on them)")
    p.add_argument("--pool", type=int, default=30, help="dev split: the corpus pools the candidates of this many questions (default: 30)")
    p.add_argument("--out", default="out/eval", help="output folder: indexes, results.jsonl, report.md, report.png (default: out/eval)")
    p.add_argument("--data-dir", help="dataset folder (default: $MULTIHOP_RAG_DATA or shared/data)")
    common(p)
    p.set_defaults(run=_eval)

    p = sub.add_parser("report", help="write evaluations' reports again from their results (no model), and one table over them")
    p.add_argument("folders", nargs="+", help="folders written by 'eval --out'")
    p.add_argument("--summary", help="also write the table over the folders to this markdown file (it is printed either way)")
    p.set_defaults(run=_report)

    p = sub.add_parser("demo", help="answer the bundled two-hop questions with naive, ReSP and HiRAG side by side")
    p.add_argument("--methods", default="default", help="comma-separated methods, or all (default: naive,resp,hirag)")
    p.add_argument("--store", help="folder for the demo's indexes (default: a new temporary folder)")
    p.add_argument("--limit", type=_positive_int, help="answer the first N demo questions only (default: all three)")
    p.add_argument("--quiet", action="store_true", help="no reasoning trace")
    common(p)
    p.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    try:
        with contextlib.ExitStack() as args.opened:  # what the command opens (its models) closes when it ends
            return int(args.run(args))
    except MultihopRagError as exc:
        _say(f"multihop-rag {args.command}: {exc}")
        return 2
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
