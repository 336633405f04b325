"""The evaluation harness: builds once, resumes, counts usage per question, writes the report."""

from __future__ import annotations

import json

import pytest

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from multihop_rag import cli
from multihop_rag.cache import CachedLLM, LLMCache, Usage, UsageCallback
from multihop_rag.corpus import Passage, Question
from multihop_rag.evaluate import EvalSettingError, evaluate
from multihop_rag.naive import Answer, Evidence
from multihop_rag.report import markdown, tper
from multihop_rag.runners import RUNNERS, Models, make_runner

PASSAGES = [
    Passage("p1", "Kesh Bridge", "The Kesh Bridge crosses the Orrin River in Velmora."),
    Passage("p2", "Orrin River", "The Orrin River flows into Lake Ismay."),
    Passage("p3", "Lake Ismay", "Lake Ismay lies in the north of Astrel."),
]
QUESTIONS = [
    Question("q1", "test", "Which river does the Kesh Bridge cross?", ["Orrin River"], supporting=["p1", "p2"],
             supporting_titles=["Kesh Bridge", "Orrin River"]),
    Question("q2", "test", "Into which lake does the Orrin flow?", ["Lake Ismay"], supporting=["p2"]),
    Question("q3", "test", "Where is Lake Ismay?", ["north of Astrel"], supporting=["p3"]),
]
SETTING = {"dataset": "test", "split": "smoke", "llm": "fake", "embed": "hash"}


class FakeModels:
    """Usage that grows by ``calls_per_answer`` on every answer."""

    def __init__(self) -> None:
        self.total = Usage()

    def usage(self) -> Usage:
        return Usage(**vars(self.total))


class FakeRunner:
    def __init__(self, name: str, models: FakeModels, answers: dict[str, str], pool: int = 10, calls: int = 2,
                 fail_at: int | None = None):
        self.name, self.models, self.answers, self.pool, self.calls, self.fail_at = name, models, answers, pool, calls, fail_at
        self.builds, self.asked = 0, []

    def build(self, passages, models, folder):
        self.builds += 1
        folder.mkdir(parents=True, exist_ok=True)
        models.total.calls += 5
        models.total.prompt_tokens += 500
        return {"pool_size": self.pool}

    def answer(self, question: str) -> Answer:
        if self.fail_at is not None and len(self.asked) == self.fail_at:
            raise KeyboardInterrupt
        self.asked.append(question)
        self.models.total.calls += self.calls
        self.models.total.prompt_tokens += 100 * self.calls
        self.models.total.completion_tokens += 3
        text = self.answers.get(question, "unknown")
        return Answer(question, text, [Evidence("p1", "Kesh Bridge", PASSAGES[0].text, 1.0)], seconds=float(self.calls))


def _answers(good: bool) -> dict[str, str]:
    return {q.question: (q.answers[0] if good else "no idea") for q in QUESTIONS}


def test_results_report_and_plot_are_written(tmp_path):
    models = FakeModels()
    runners = [FakeRunner("naive", models, _answers(False), pool=3, calls=1), FakeRunner("raptor", models, _answers(True), pool=6, calls=2)]
    results, builds = evaluate(runners, PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)

    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and {line["method"] for line in lines} == {"naive", "raptor"}
    raptor_q1 = next(r for r in lines if r["method"] == "raptor" and r["id"] == "q1")
    assert raptor_q1["em"] == 1.0 and raptor_q1["f1"] == 1.0 and raptor_q1["answer_recall"] == 1.0
    assert raptor_q1["supporting_recall"] == 0.5  # evidence p1 is one of q1's two supporting passages
    assert raptor_q1["llm_calls"] == 2 and raptor_q1["prompt_tokens"] == 200 and raptor_q1["completion_tokens"] == 3
    assert builds["raptor"]["llm_calls"] == 5 and builds["raptor"]["prompt_tokens"] == 500
    assert builds["naive"]["pool_size"] == 3 and builds["raptor"]["status"] == "done"

    report = (tmp_path / "report.md").read_text()
    assert "## Exact match" in report and "## F1" in report and "## Cost" in report
    assert "| raptor | 3 | 1.000 | [1.000, 1.000] |" in report
    # the summary: F1 with its interval, EM, answer recall, build s and calls, s and calls per query
    assert "| raptor | 3 | 1.000 [1.000, 1.000] | 1.000 | 0.333 | 0 | 5 | 2.0 | 2.0 |" in report  # p1 holds q1's answer only
    assert report.index("## Summary") < report.index("## Exact match")
    # TPER of naive vs RAPTOR: (1 s / 2 s) / (3 / 6) = 1.0; RAPTOR against itself is 1 by definition
    assert tper(1.0, 3, 2.0, 6) == 1.0
    # build s, build calls, build tokens, pool, TPQ, calls/query, tokens/query (100 + 3), TPER
    assert "| naive | 0 | 5 | 500 / 0 | 3 | 1.0 | 1.0 | 103 | 1.000 |" in report
    assert "| raptor | 0 | 5 | 500 / 0 | 6 | 2.0 | 2.0 | 203 | 1.000 |" in report
    assert "separate from every other" in report  # raptor's F1 interval [1, 1] vs naive's [0, 0]
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_index_is_built_once_and_answers_resume(tmp_path):
    models = FakeModels()
    first = FakeRunner("naive", models, _answers(True), fail_at=1)
    with pytest.raises(KeyboardInterrupt):
        evaluate([first], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1  # q1 kept

    again = FakeRunner("naive", models, _answers(True))
    results, builds = evaluate([again], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert again.asked == [q.question for q in QUESTIONS[1:]]  # q1 not asked again
    assert [r.id for r in results["naive"]] == ["q1", "q2", "q3"]
    assert again.builds == 1 and builds["naive"]["seconds"] >= 0  # reloaded, first build's record kept
    record = json.loads((tmp_path / "builds.json").read_text())["naive"]
    assert record["llm_calls"] == 5 and record["resumed"] is False


def test_a_finished_method_is_reported_again_without_loading_its_index(tmp_path):
    models = FakeModels()
    evaluate([FakeRunner("naive", models, _answers(True))], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    (tmp_path / "report.md").unlink()

    again = FakeRunner("naive", models, _answers(False))
    results, builds = evaluate([again], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert again.builds == 0 and again.asked == []  # nothing left to answer: the index is not even loaded
    assert [r.em for r in results["naive"]] == [1.0, 1.0, 1.0] and builds["naive"]["llm_calls"] == 5
    assert "| naive | 3 | 1.000 |" in (tmp_path / "report.md").read_text()


def test_interrupted_build_is_marked_resumed(tmp_path):
    class Crash(FakeRunner):
        def build(self, passages, models, folder):
            raise KeyboardInterrupt

    models = FakeModels()
    with pytest.raises(KeyboardInterrupt):
        evaluate([Crash("raptor", models, {})], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    _, builds = evaluate([FakeRunner("raptor", models, {})], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert builds["raptor"]["resumed"] is True
    assert "(resumed)" in (tmp_path / "report.md").read_text()


def test_build_calls_answered_from_the_cache_are_shown_as_such(tmp_path):
    class CachedBuild(FakeRunner):
        def build(self, passages, models, folder):
            models.total.cache_hits += 4  # e.g. SiReRAG's similarity tree, already summarized for RAPTOR
            return super().build(passages, models, folder)

    models = FakeModels()
    _, builds = evaluate([CachedBuild("sirerag", models, _answers(True), pool=3, calls=1)], PASSAGES, QUESTIONS,
                         models, tmp_path, SETTING, show_progress=False)
    assert builds["sirerag"]["cache_hits"] == 4 and builds["sirerag"]["llm_calls"] == 5
    report = (tmp_path / "report.md").read_text()
    assert "| sirerag | 0 | 5 (4 cached) | 500 / 0 | 3 |" in report
    # the evidence is p1 for every question: q1 has 1 of 2 supporting passages, q2 and q3 none
    assert "## Supporting-passage recall" in report and "| sirerag | 3 | 0.167 |" in report


def test_other_setting_in_the_same_folder_is_refused(tmp_path):
    models = FakeModels()
    evaluate([FakeRunner("naive", models, {})], PASSAGES, QUESTIONS[:1], models, tmp_path, SETTING, show_progress=False)
    with pytest.raises(EvalSettingError, match="another dataset"):
        evaluate([FakeRunner("naive", models, {})], PASSAGES, QUESTIONS[:1], models, tmp_path,
                 SETTING | {"dataset": "other"}, show_progress=False)


def test_report_without_raptor_says_how_to_get_tper_and_notes_overlap():
    from multihop_rag.evaluate import Result

    def result(method: str, f1: float) -> Result:
        return Result(method, "q", "q?", "a", ["a"], f1, f1, f1, f1, 1.0, 0.0, 1.0, [])

    results = {"naive": [result("naive", v) for v in (0, 1, 0, 1)], "resp": [result("resp", v) for v in (1, 1, 0, 1)]}
    text = markdown(results, {"naive": {"pool_size": 3}, "resp": {"pool_size": 3}}, SETTING)
    assert "add `raptor` to `--methods`" in text
    assert "Highest mean: resp; its interval overlaps naive" in text
    assert "n_s" not in text  # GARLIC's n_s is named only when it was set
    assert ", GARLIC n_s 2048" in markdown(results, {}, SETTING | {"garlic_n_s": 2048})


def test_query_time_with_cached_calls_is_marked_as_an_undercount():
    from multihop_rag.evaluate import Result

    fresh = Result("naive", "q1", "q?", "a", ["a"], 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 30.0, [], llm_calls=2)
    cached = Result("garlic", "q1", "q?", "a", ["a"], 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 5.0, [], llm_calls=4, cache_hits=3)
    text = markdown({"naive": [fresh], "garlic": [cached]}, {"naive": {"pool_size": 3}, "garlic": {"pool_size": 3}}, SETTING)
    assert "| 5.0 (3 of 4 calls cached) | 4.0 |" in text  # the summary and the cost table
    assert text.count("(3 of 4 calls cached)") == 2 and "| 30.0 | 2.0 |" in text
    assert 'marked "cached"' in text


def test_eval_methods_listed_by_the_cli_are_the_runners():
    assert cli.EVAL_METHODS == tuple(RUNNERS)
    with pytest.raises(KeyError):
        make_runner("nosuch")


def test_garlic_attention_setting_does_not_depend_on_the_methods_run():
    from multihop_rag.backends import Spec

    # It is part of the folder's setting: a later run naming other methods must not look like
    # another setting (it used to be None unless "garlic" was among the methods, and was refused).
    assert cli.garlic_attention_spec("auto", Spec("llamacpp", "qwen2.5-coder-0.5b")) == "qwen2.5-coder-0.5b"
    assert cli.garlic_attention_spec("auto", Spec("ollama", "qwen2.5:7b-instruct")) is None
    assert cli.garlic_attention_spec("none", Spec("llamacpp", "default")) is None
    assert cli.garlic_attention_spec("/models/x.gguf", Spec("ollama", "m")) == "/models/x.gguf"


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


def _models(tmp_path, llm_reply="Orrin River", chat_reply="Orrin River") -> Models:
    cache = LLMCache(tmp_path / "calls.sqlite")
    models = Models(llm=CachedLLM(inner=ScriptedLLM(lambda p: llm_reply), cache=cache), embed=HashEmbedding(),
                    chat=ScriptedChatModel(lambda p: chat_reply), lc_embed=HashEmbeddings())
    models.chat.callbacks = [UsageCallback(models.chat_usage)]
    return models


def test_runners_answer_with_their_evidence(tmp_path):
    models = _models(tmp_path)
    runners = [make_runner("naive"), make_runner("resp"), make_runner("hirag")]
    results, builds = evaluate(runners, PASSAGES, QUESTIONS[:1], models, tmp_path / "out", SETTING, show_progress=False)
    naive, resp, hirag = results["naive"][0], results["resp"][0], results["hirag"][0]
    assert hirag.answer == "Orrin River" and hirag.llm_calls >= 3 and hirag.evidence_ids
    assert hirag.supporting_recall > 0  # HiRAG's evidence is chunks: matched to passages by title
    assert builds["hirag"]["stats"]["documents"] == 3
    assert naive.answer == "Orrin River" and naive.llm_calls == 1 and naive.evidence_ids[0] == "p1"
    assert resp.answer and resp.llm_calls >= 2 and "p1" in resp.evidence_ids  # ReSP: judge + generate at least
    assert builds["resp"]["pool_size"] == 3 and builds["naive"]["pool_size"] == 3
    # reloading reuses the Chroma collections instead of adding the passages again
    _, builds = evaluate([make_runner("resp")], PASSAGES, QUESTIONS[:1], _models(tmp_path), tmp_path / "out", SETTING,
                         show_progress=False)
    assert builds["resp"]["pool_size"] == 3


def test_garlic_runner_builds_with_the_n_s_it_is_given(tmp_path):
    models = _models(tmp_path, llm_reply="- The Orrin River flows into Lake Ismay.")
    runner = make_runner("garlic", garlic_n_s=1024)
    stats = runner.build(PASSAGES, models, tmp_path / "garlic")
    saved = json.loads((tmp_path / "garlic" / "garlic.json").read_text())
    assert saved["config"]["n_s"] == 1024 and stats["pool_size"] > 0
    assert make_runner("garlic").n_s is None  # the paper's 8K, capped by the LLM's context
    # never "Yes": the search visits every node; the level-1 chunk (all three short passages packed
    # into one) stands for each passage in it, the summary nodes for none
    answer = runner.answer(QUESTIONS[0].question)
    chunk_ids = [e.id for e in answer.evidence if e.id in {p.id for p in PASSAGES}]
    assert chunk_ids == [p.id for p in PASSAGES]
    assert len(answer.evidence) > len(chunk_ids)  # the summary nodes, under their node ids


def test_hirag_retrieves_even_when_the_decomposer_will_not_ask(tmp_path):
    """Issue 22: a small decomposer said "That's enough." before any retrieval and HiRAG answered
    closed-book (no evidence, 3 calls). Asked twice, it now retrieves for the question itself."""
    models = _models(tmp_path, chat_reply="That's enough.")
    results, _ = evaluate([make_runner("hirag")], PASSAGES, QUESTIONS[:1], models, tmp_path / "out", SETTING,
                          show_progress=False)
    hirag = results["hirag"][0]
    assert hirag.evidence_ids and hirag.llm_calls > 3


def test_a_failing_question_is_logged_and_skipped_but_repeated_failures_stop(tmp_path, caplog):
    class Flaky(FakeRunner):
        def answer(self, question):
            if question in self.failing:
                raise ValueError("Requested tokens (8217) exceed context window of 8192")
            return super().answer(question)

    models = FakeModels()
    flaky = Flaky("garlic", models, _answers(True))
    flaky.failing = {QUESTIONS[1].question}
    results, _ = evaluate([flaky], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert [r.id for r in results["garlic"]] == ["q1", "q3"]
    assert json.loads((tmp_path / "errors.jsonl").read_text())["id"] == "q2" and "q2" in caplog.text

    flaky.failing = set()  # a re-run asks only the failed question
    flaky.asked.clear()
    results, _ = evaluate([flaky], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    assert flaky.asked == [QUESTIONS[1].question] and len(results["garlic"]) == 3

    broken = Flaky("naive", models, _answers(True))
    broken.failing = {q.question for q in QUESTIONS}  # the fault is the setup, not a question
    with pytest.raises(ValueError):
        evaluate([broken], PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)


def test_an_interrupted_run_still_reports_the_methods_it_finished(tmp_path):
    models = FakeModels()
    runners = [FakeRunner("naive", models, _answers(True)), FakeRunner("garlic", models, _answers(True), fail_at=0)]
    with pytest.raises(KeyboardInterrupt):
        evaluate(runners, PASSAGES, QUESTIONS, models, tmp_path, SETTING, show_progress=False)
    report = (tmp_path / "report.md").read_text()
    assert "| naive | 3 | 1.000 |" in report and "garlic" not in report
