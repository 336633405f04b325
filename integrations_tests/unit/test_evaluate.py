"""The evaluation harness: builds once, resumes, stores what the report scores, sets aside stale
rows, and the report's scores (computed from the rows, at report time)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from multihop_rag.app import cli, registry
from multihop_rag.app.evaluate import Entry, Result, evaluate, read_results
from multihop_rag.app.report import failure, markdown, scores, tper
from multihop_rag.corpus import Passage, Question
from multihop_rag.errors import EvalSettingError, IndexFolderError
from multihop_rag.llm.cache import CachedLLM, LLMCache, UsageCallback
from multihop_rag.llm.usage import Usage
from multihop_rag.method import Answer, Evidence, Models, UpdateReport

PASSAGES = [
    Passage("p1", "Kesh Bridge", "The Kesh Bridge crosses the Orrin River in Velmora."),
    Passage("p2", "Orrin River", "The Orrin River flows into Lake Ismay."),
    Passage("p3", "Lake Ismay", "Lake Ismay lies in the north of Astrel."),
]
QUESTIONS = [
    Question("q1", "test", "Which river does the Kesh Bridge cross?", ["Orrin River"], supporting=["p1", "p2"],
             supporting_titles=["Kesh Bridge", "Orrin River"], type="bridge"),
    Question("q2", "test", "Into which lake does the Orrin flow?", ["Lake Ismay"], supporting=["p2"], type="bridge"),
    Question("q3", "test", "Where is Lake Ismay?", ["north of Astrel"], supporting=["p3"], type="bridge"),
]
SETTING = {"dataset": "test", "split": "smoke", "llm": "fake", "embed": "hash"}


class FakeModels:
    def __init__(self) -> None:
        self.total = Usage()

    def usage(self) -> Usage:
        return Usage(**vars(self.total))


class FakeConfig(BaseModel):
    depth: int = 1


class FakeIndex:
    def __init__(self, method: FakeMethod, models: FakeModels):
        self.method, self.models = method, models

    def answer(self, question: str, trace=None) -> Answer:
        m = self.method
        if m.fail_at is not None and len(m.asked) == m.fail_at:
            raise KeyboardInterrupt
        if question in m.failing:
            raise ValueError("Requested tokens (8217) exceed context window of 8192")
        m.asked.append(question)
        self.models.total.calls += m.calls
        self.models.total.prompt_tokens += 100 * m.calls
        self.models.total.completion_tokens += 3
        evidence = [Evidence("s1", "", "A summary naming the Orrin River.", 1.0, [], "summary", source_ids=["p2"]),
                    Evidence("p1", "Kesh Bridge", PASSAGES[0].text, 0.9, ["p1"], "passage")]
        return Answer(question, m.answers.get(question, "no idea"), evidence, seconds=float(m.calls),
                      info={"stop_reason": "answered"})

    def update(self, passages) -> UpdateReport:
        return UpdateReport()

    def stats(self) -> dict:
        return {"pool_size": self.method.pool}


class FakeMethod:
    summary = "a scripted method"
    builds = True
    config_class = FakeConfig
    source_packages = ("multihop_rag.app.naive",)

    def __init__(self, name: str, answers: dict[str, str], pool: int = 10, calls: int = 2, fail_at: int | None = None,
                 crash_build: bool = False, replayed: int = 0):
        self.name, self.answers, self.pool, self.calls, self.fail_at = name, answers, pool, calls, fail_at
        self.crash_build, self.replayed, self.failing = crash_build, replayed, set()
        self.builds_done, self.loads, self.asked = 0, 0, []

    def build(self, passages, models, folder: Path, config, *, overwrite=False) -> FakeIndex:
        folder.mkdir(parents=True, exist_ok=True)  # a real build keeps its progress there as it goes
        if self.crash_build:
            raise KeyboardInterrupt
        self.builds_done += 1
        models.total.calls += 5
        models.total.cache_hits += self.replayed  # calls a killed build had finished, answered by the call cache
        models.total.prompt_tokens += 500
        return FakeIndex(self, models)

    def load(self, folder, models, config) -> FakeIndex:
        if not folder.exists():
            raise IndexFolderError(f"{folder}: no index")
        self.loads += 1
        return FakeIndex(self, models)


def _answers(good: bool) -> dict[str, str]:
    return {q.question: (q.answers[0] if good else "no idea") for q in QUESTIONS}


def _run(methods, out, models=None, questions=QUESTIONS, setting=SETTING, config=None):
    entries = [Entry(m, config or FakeConfig()) for m in methods]
    return evaluate(entries, PASSAGES, questions, models or FakeModels(), out, setting, show_progress=False)


def test_rows_hold_the_ranked_evidence_and_cost_and_the_report_scores_them(tmp_path):
    results, builds = _run([FakeMethod("naive", _answers(False), pool=3, calls=1),
                            FakeMethod("raptor", _answers(True), pool=6, calls=2)], tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["method"] for r in rows} == {"naive", "raptor"}
    q1 = next(r for r in rows if r["method"] == "raptor" and r["id"] == "q1")
    assert [e["kind"] for e in q1["evidence"]] == ["summary", "passage"] and q1["evidence"][1]["passage_ids"] == ["p1"]
    assert (q1["llm_calls"], q1["prompt_tokens"], q1["completion_tokens"]) == (2, 200, 3)
    assert q1["code"] and q1["config"] == {"depth": 1} and q1["info"]["stop_reason"] == "answered"
    assert builds["raptor"]["llm_calls"] == 5 and builds["naive"]["pool_size"] == 3

    s = scores(results["raptor"][0])
    assert s["em"] == 1.0 and s["f1"] == 1.0
    assert s["support@2"] == 0.5  # p1 is one of q1's two; the summary holds no passage's text …
    assert s["sources@10"] == 1.0  # … but was written from p2
    assert s["answer@2"] == 1.0  # the summary names the answer

    report = (tmp_path / "report.md").read_text()
    assert report.index("## Summary") < report.index("## Failure categories") < report.index("## Cost")
    assert "raptor vs naive: +1.000 F1 [+1.000, +1.000] on 3 questions: too few to resolve" in report
    assert "| raptor | bridge | 3 |" in report  # per question type, against naive
    assert "| sources@10 |" in report
    assert tper(1.0, 3, 2.0, 6) == 1.0  # SiReRAG eq. (1)
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_index_is_built_once_and_answers_resume(tmp_path):
    models = FakeModels()
    first = FakeMethod("naive", _answers(True), fail_at=1)
    with pytest.raises(KeyboardInterrupt):
        _run([first], tmp_path, models)
    assert len(read_results(tmp_path)) == 1  # q1 kept

    again = FakeMethod("naive", _answers(True))
    results, builds = _run([again], tmp_path, models)
    assert again.asked == [q.question for q in QUESTIONS[1:]] and again.builds_done == 0 and again.loads == 1
    assert [r.id for r in results["naive"]] == ["q1", "q2", "q3"]
    assert builds["naive"]["llm_calls"] == 5 and builds["naive"]["resumed"] is False


def test_a_finished_method_is_reported_again_without_loading_its_index(tmp_path):
    _run([FakeMethod("naive", _answers(True))], tmp_path)
    again = FakeMethod("naive", _answers(False))
    results, _ = _run([again], tmp_path)
    assert again.loads == 0 and again.builds_done == 0 and again.asked == []
    assert [scores(r)["em"] for r in results["naive"]] == [1.0, 1.0, 1.0]


def test_changed_settings_set_old_rows_aside_and_rebuild(tmp_path):
    _run([FakeMethod("naive", _answers(False))], tmp_path)
    again = FakeMethod("naive", _answers(True))
    results, builds = _run([again], tmp_path, config=FakeConfig(depth=2))
    assert again.builds_done == 1 and len(again.asked) == 3  # rebuilt and re-answered, not mixed
    assert [r.config for r in results["naive"]] == [{"depth": 2}] * 3
    stale = (tmp_path / "results.stale.jsonl").read_text().splitlines()
    assert len(stale) == 3 and all(json.loads(line)["config"] == {"depth": 1} for line in stale)
    assert builds["naive"]["version"]["config"] == {"depth": 2}


def test_an_interrupted_build_is_marked_resumed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run([FakeMethod("raptor", {}, crash_build=True)], tmp_path)
    _, builds = _run([FakeMethod("raptor", {}, replayed=2)], tmp_path)
    assert builds["raptor"]["resumed"] is True and "(resumed)" in (tmp_path / "report.md").read_text()
    # the summary's row too: its build seconds and calls are the last run's, not a whole build's
    summary = next(line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| raptor |"))
    assert "(resumed)" in summary and "(2 cached)" in summary


def test_an_interrupted_build_that_replays_no_call_is_a_whole_build_not_a_resumed_one(tmp_path):
    # killed before its first LLM call finished (RAPTOR on the HotpotQA pool): the build after it made every call
    with pytest.raises(KeyboardInterrupt):
        _run([FakeMethod("raptor", {}, crash_build=True)], tmp_path)
    _, builds = _run([FakeMethod("raptor", {}, replayed=0)], tmp_path)
    assert builds["raptor"]["resumed"] is False and "(resumed)" not in (tmp_path / "report.md").read_text()


def test_a_build_whose_interrupted_folder_is_gone_is_a_whole_build_not_a_resumed_one(tmp_path):
    # builds.json is committed with the results, the index folder is not: a fresh checkout rebuilds from nothing
    with pytest.raises(KeyboardInterrupt):
        _run([FakeMethod("raptor", {}, crash_build=True)], tmp_path)
    shutil.rmtree(tmp_path / "indexes")
    _, builds = _run([FakeMethod("raptor", {})], tmp_path)
    assert builds["raptor"]["resumed"] is False and "(resumed)" not in (tmp_path / "report.md").read_text()


def test_an_interrupted_build_continued_on_a_fresh_checkout_from_the_committed_cache_is_marked_resumed(tmp_path):
    # the folder is gone but the calls the killed build finished replay: its seconds are not a whole build's
    with pytest.raises(KeyboardInterrupt):
        _run([FakeMethod("raptor", {}, crash_build=True)], tmp_path)
    shutil.rmtree(tmp_path / "indexes")
    _, builds = _run([FakeMethod("raptor", {}, replayed=3)], tmp_path)
    assert builds["raptor"]["resumed"] is True and "(resumed)" in (tmp_path / "report.md").read_text()


def test_a_finished_build_rebuilt_on_a_fresh_checkout_keeps_the_figures_of_the_build_that_made_its_calls(tmp_path):
    # The run of record's RAPTOR build (2,000 s, 67 calls) was rebuilt from the committed call cache on a new machine
    # (the index folder is not committed) and builds.json then said 9 s and 0 calls.
    _run([FakeMethod("raptor", {})], tmp_path, questions=QUESTIONS[:1])
    first = json.loads((tmp_path / "builds.json").read_text())["raptor"]
    shutil.rmtree(tmp_path / "indexes")
    again = FakeMethod("raptor", {}, replayed=5)
    _, builds = _run([again], tmp_path)  # two questions left to answer
    assert again.builds_done == 1 and len(again.asked) == 2
    assert {k: v for k, v in builds["raptor"].items() if k != "rebuilt"} == first
    assert builds["raptor"]["rebuilt"]["cache_hits"] == 5
    assert f"| raptor | {first['seconds']:.0f} |" in (tmp_path / "report.md").read_text()


def test_another_setting_in_the_same_folder_is_refused(tmp_path):
    _run([FakeMethod("naive", {})], tmp_path, questions=QUESTIONS[:1])
    with pytest.raises(EvalSettingError, match="another dataset"):
        _run([FakeMethod("naive", {})], tmp_path, questions=QUESTIONS[:1], setting=SETTING | {"dataset": "other"})


def test_a_failing_question_is_logged_and_skipped_but_repeated_failures_stop(tmp_path, caplog):
    flaky = FakeMethod("garlic", _answers(True))
    flaky.failing = {QUESTIONS[1].question}
    results, _ = _run([flaky], tmp_path)
    assert [r.id for r in results["garlic"]] == ["q1", "q3"]
    assert json.loads((tmp_path / "errors.jsonl").read_text())["id"] == "q2" and "q2" in caplog.text

    flaky.failing, flaky.asked = set(), []
    results, _ = _run([flaky], tmp_path)
    assert flaky.asked == [QUESTIONS[1].question] and len(results["garlic"]) == 3

    broken = FakeMethod("naive", _answers(True))
    broken.failing = {q.question for q in QUESTIONS}  # the fault is the setup, not a question
    with pytest.raises(ValueError):
        _run([broken], tmp_path)


def test_an_interrupted_run_still_reports_the_methods_it_finished(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run([FakeMethod("naive", _answers(True)), FakeMethod("garlic", _answers(True), fail_at=0)], tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| naive | 3 |" in report and "| garlic |" not in report


def _result(method: str, qid: str, answer: str, gold: list[str], question: str = "q?", **kw) -> Result:
    return Result(method, qid, question, None, answer, gold, kw.pop("supporting", []), [], kw.pop("evidence", []),
                  kw.pop("info", {}), kw.pop("seconds", 1.0), **kw)


def test_failure_categories_come_from_the_trace_and_the_evidence():
    passage = {"id": "p1", "title": "", "text": "The Orrin River.", "passage_ids": ["p1"], "kind": "passage", "score": 1}
    rows = [
        _result("resp", "a", "Orrin River", ["Orrin River"]),
        _result("resp", "b", "I do not know", ["Orrin River"]),
        _result("resp", "c", "Tomas Halvard", ["Orrin River"], info={"copied_example": True}),
        _result("resp", "d", "x", ["Orrin River"], info={"limit_hit": True}),
        _result("resp", "e", "Lake Ismay", ["Orrin River"], evidence=[passage]),
        _result("resp", "f", "Lake Ismay", ["Orrin River"]),
    ]
    text = markdown({"resp": rows}, {}, SETTING)
    assert "| resp | 1 | 1 | 1 | 1 | 1 | 1 |" in text


def test_a_title_beginning_with_a_refusal_word_is_an_answer_and_a_sentence_saying_unknown_is_none():
    assert failure(_result("resp", "a", "Unknown Pleasures", ["Closer"]), scores(_result("resp", "a", "Unknown Pleasures", ["Closer"]))) == "retrieval missed"
    said = _result("resp", "b", "The record label of the Another Page performer is unknown.", ["Orrin Records"])
    assert failure(said, scores(said)) == "no answer"


def test_comparison_answers_are_scored_by_the_option_they_pick():
    q = "Who was born first, Ada Lind or Bo Sten?"
    s = scores(_result("naive", "a", "Bo Sten was born before Ada Lind.", ["Bo Sten"], question=q))
    assert s["comparison"] == 1.0
    assert scores(_result("naive", "b", "Ada Lind", ["Bo Sten"], question=q))["comparison"] == 0.0


def test_a_difference_on_fewer_than_ten_questions_is_never_called_resolved():
    """Per-type rows of one question were marked resolved: a bootstrap of one paired value has a
    zero-width interval. Nine wins in nine is shown, not called; ten in ten is."""
    def rows(n: int) -> dict[str, list[Result]]:
        ids = [f"q{i}" for i in range(n)]
        return {"naive": [dataclasses.replace(_result("naive", i, "Lake Ismay", ["Orrin River"]), type="bridge") for i in ids],
                "resp": [dataclasses.replace(_result("resp", i, "Orrin River", ["Orrin River"]), type="bridge") for i in ids]}

    nine = markdown(rows(9), {}, SETTING)
    assert "resp vs naive: +1.000 F1 [+1.000, +1.000] on 9 questions: too few to resolve (fewer than 10)." in nine
    assert "| resp | bridge | 9 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] | 9/0/0 |" in nine
    ten = markdown(rows(10), {}, SETTING)
    assert "resp is ahead of naive by +1.000 F1 [+1.000, +1.000] on 10 questions: resolved." in ten
    assert "| resp | bridge | 10 | 1.000 | 0.000 | +1.000 [+1.000, +1.000] (resolved) | 10/0/0 |" in ten


def test_query_time_with_cached_calls_is_marked_as_an_undercount():
    fresh = _result("naive", "q1", "a", ["a"], seconds=30.0, llm_calls=2)
    cached = _result("garlic", "q1", "a", ["a"], seconds=5.0, llm_calls=1, cache_hits=3)
    text = markdown({"naive": [fresh], "garlic": [cached]}, {"naive": {"pool_size": 3}, "garlic": {"pool_size": 3}}, SETTING)
    assert "5.0 (3 of 4 calls cached)" in text and "add `raptor` to `--methods`" in text


def test_usage_callback_counts_calls_and_tokens():
    class Counted(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            result = super()._generate(messages, stop, run_manager, **kwargs)
            result.generations[0].message.usage_metadata = {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}
            return result

    usage = Usage()
    chat = Counted(lambda p: "ok")
    chat.callbacks = [UsageCallback(usage)]
    chat.invoke("a")
    chat.invoke("b")
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (2, 14, 4)


def test_chat_model_calls_count_in_seconds_and_busy_time():
    """ReSP's and HiRAG's rows had busy_seconds 0: only the LlamaIndex LLM's calls were timed."""
    def slow(prompt: str) -> str:
        time.sleep(0.05)
        return "ok"

    usage = Usage()
    chat = ScriptedChatModel(slow)
    chat.callbacks = [UsageCallback(usage)]
    chat.invoke("a")
    asyncio.run(chat.ainvoke("b"))
    assert usage.calls == 2 and usage.seconds >= 0.1 and 0.1 <= usage.busy_seconds <= usage.seconds


def test_busy_time_of_both_frameworks_is_the_union_of_their_calls(tmp_path):
    """A chat call made while a LlamaIndex call is in flight adds its seconds but no busy time."""
    llm_started = threading.Event()

    def slow_llm(prompt: str) -> str:
        llm_started.set()
        time.sleep(0.4)
        return "ok"

    def quick_chat(prompt: str) -> str:
        time.sleep(0.1)
        return "ok"

    models = _models(tmp_path)
    models = dataclasses.replace(models, llm=CachedLLM(inner=ScriptedLLM(slow_llm)), chat=ScriptedChatModel(quick_chat))
    models.chat.callbacks = [UsageCallback(models.chat_usage, models.chat_clock)]
    worker = threading.Thread(target=models.llm.complete, args=("a",))
    worker.start()
    llm_started.wait()
    models.chat.invoke("b")
    worker.join()
    spent = models.usage()
    assert spent.calls == 2 and spent.seconds >= 0.5
    assert 0.4 <= spent.busy_seconds < spent.seconds - 0.05


def _models(tmp_path, llm_reply="Orrin River", chat_reply="Orrin River") -> Models:
    cache = LLMCache(tmp_path / "calls.sqlite")
    models = Models(llm=CachedLLM(inner=ScriptedLLM(lambda p: llm_reply), cache=cache), embed=HashEmbedding(),
                    chat=ScriptedChatModel(lambda p: chat_reply), lc_embed=HashEmbeddings())
    models.chat.callbacks = [UsageCallback(models.chat_usage, models.chat_clock)]
    return models


def _entries(*names: str) -> list[Entry]:
    return [Entry(registry.get(n), registry.get(n).config_class()) for n in names]


def test_registered_methods_answer_with_their_evidence(tmp_path):
    results, builds = evaluate(_entries("naive", "resp", "hirag"), PASSAGES, QUESTIONS[:1], _models(tmp_path),
                               tmp_path / "out", SETTING, show_progress=False)
    naive, resp, hirag = results["naive"][0], results["resp"][0], results["hirag"][0]
    assert naive.answer == "Orrin River" and naive.llm_calls == 1 and naive.evidence[0]["passage_ids"]
    assert resp.answer and resp.llm_calls >= 2 and any("p1" in e["passage_ids"] for e in resp.evidence)
    assert hirag.answer == "Orrin River" and hirag.llm_calls >= 3 and hirag.evidence
    assert scores(hirag)["support@20"] > 0  # HiRAG's chunks name the passage they cut
    assert builds["resp"]["pool_size"] == 3 and builds["naive"]["pool_size"] == 3
    # a second run reloads the stores instead of adding the passages again
    _, builds = evaluate(_entries("resp"), PASSAGES, QUESTIONS, _models(tmp_path), tmp_path / "out", SETTING,
                         show_progress=False)
    assert builds["resp"]["pool_size"] == 3


def test_hirag_retrieves_even_when_the_decomposer_will_not_ask(tmp_path):
    """Issue 22: a small decomposer said "That's enough." before any retrieval and HiRAG answered
    closed-book. Asked again, then given the question itself, it now retrieves."""
    results, _ = evaluate(_entries("hirag"), PASSAGES, QUESTIONS[:1], _models(tmp_path, chat_reply="That's enough."),
                          tmp_path / "out", SETTING, show_progress=False)
    hirag = results["hirag"][0]
    assert hirag.evidence and hirag.llm_calls > 3


def test_naive_reads_chunks_in_rank_order_up_to_its_token_budget():
    from multihop_rag.app.naive import NaiveConfig, NaiveRAG

    llm = ScriptedLLM(lambda prompt: "Orrin River")
    passages = [Passage(f"p{i}", f"T{i}", f"Passage {i} says the Orrin River is long. " * 3) for i in range(12)]
    built = NaiveRAG.build(passages, llm=llm, embed_model=HashEmbedding(), show_progress=False, overwrite=True)
    for budget, read in ((0, 5), (1, 1), (70, 2), (400, 11)):
        answer = NaiveRAG(built.index, llm, NaiveConfig(reader_tokens=budget)).answer("How long is the Orrin River?")
        assert answer.info["read"] == min(read, 12), budget  # ~31 tokens a chunk; at least one is always read
        assert len(answer.evidence) >= answer.info["read"]


def test_every_registered_method_hashes_code_that_exists():
    """A method's code version covers its real source: a package name left behind by a move is an error, not
    a constant hash that would keep stale answers."""
    from multihop_rag.method import source_hash

    for method in registry.available().values():
        assert len(source_hash(method.source_packages)) == 12
    with pytest.raises(ModuleNotFoundError, match="multihop_rag.naive"):
        source_hash(["multihop_rag.naive"])


def test_report_rewrites_each_folders_report_from_its_results_and_sums_them_up_in_one_table(tmp_path, capsys):
    """Issue 43: a fresh clone re-runs the report from the committed results, without a model; the run of
    record's datasets in one table, each method against both naive controls."""
    good, bad = _answers(True), _answers(False)
    for name, setting in (("a", {**SETTING, "passages": 3}), ("b", {**SETTING, "dataset": "other", "passages": 3})):
        _run([FakeMethod("naive", bad), FakeMethod("raptor", good)], tmp_path / name, setting=setting)
        (tmp_path / name / "report.md").unlink()
    summary = tmp_path / "summary.md"
    assert cli.main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--summary", str(summary)]) == 0
    assert "raptor vs naive: +1.000 F1" in (tmp_path / "a" / "report.md").read_text()
    table = summary.read_text()
    assert "| test | 3 passages | raptor | 3 | 1.000 | +1.000 [+1.000, +1.000], too few | – | 2.0 |" in table
    assert "| other | 3 passages | raptor | 3 | 1.000 |" in table and "| test | 3 passages | naive | 3 | 0.000 | – | – |" in table
    assert table in capsys.readouterr().out

    assert cli.main(["report", str(tmp_path / "missing")]) == 2
    assert "holds no evaluation" in capsys.readouterr().err


def test_scores_normalise_each_evidence_text_once():
    """A report scores every method's evidence at four depths and three budgets (and the failure category reads it
    again): each distinct text is normalised once, not once per depth (a report of the run of record took 25 min)."""
    from multihop_rag.metrics import normalize_answer

    texts = [f"Passage {i}: the Orrin River, a river of Astrel ({i} km)." for i in range(20)]
    r = _result("naive", "a", "Orrin River", ["Lake Ismay"], evidence=[{"text": t, "passage_ids": [str(i)]} for i, t in enumerate(texts)])
    normalize_answer.cache_clear()
    s = scores(r)
    failure(r, s)
    assert normalize_answer.cache_info().misses <= len(texts) + 3  # the texts, the gold, the answer, the question
