import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from integrations_tests.fakes import ScriptedLLM
from multihop_rag.cache import CachedLLM, LLMCache, SQLiteChatCache, cache_key


def test_key_depends_on_model_prompt_and_params():
    assert cache_key("m", "p", {"t": 0}) == cache_key("m", "p", {"t": 0})
    assert len({cache_key("m", "p"), cache_key("m2", "p"), cache_key("m", "p2"), cache_key("m", "p", {"t": 1})}) == 4


def test_llama_index_wrapper_hits_and_counts(tmp_path):
    inner = ScriptedLLM(lambda p: p.upper())
    llm = CachedLLM(inner=inner, cache=LLMCache(tmp_path / "c.sqlite"))
    assert llm.complete("abc").text == "ABC"
    assert llm.complete("abc").text == "ABC"
    assert llm.complete("abc", format={"type": "object"}).text == "ABC"  # other params, other key
    assert len(inner.prompts) == 2
    assert (llm.usage.calls, llm.usage.cache_hits) == (2, 1)
    # A new process (new wrapper, same file) still hits.
    again = CachedLLM(inner=ScriptedLLM([]), cache=LLMCache(tmp_path / "c.sqlite"))
    assert again.complete("abc").text == "ABC"


async def test_async_and_chat(tmp_path):
    from llama_index.core.llms import ChatMessage

    inner = ScriptedLLM(lambda p: "answer")
    llm = CachedLLM(inner=inner, cache=LLMCache(tmp_path / "c.sqlite"))
    assert (await llm.acomplete("q")).text == "answer"
    assert (await llm.acomplete("q")).text == "answer"
    msgs = [ChatMessage(role="user", content="hi")]
    assert llm.chat(msgs).message.content == "answer"
    assert (await llm.achat(msgs)).message.content == "answer"
    assert len(inner.prompts) == 2


def test_langchain_cache(tmp_path):
    cache = SQLiteChatCache(tmp_path / "lc.sqlite")
    first = GenericFakeChatModel(messages=iter([AIMessage(content="one")]), cache=cache)
    assert first.invoke("q").content == "one"
    second = GenericFakeChatModel(messages=iter([]), cache=SQLiteChatCache(tmp_path / "lc.sqlite"))
    assert second.invoke("q").content == "one"


BUILD = textwrap.dedent(
    """
    import sys, time
    from integrations_tests.fakes import ScriptedLLM
    from multihop_rag.cache import CachedLLM, LLMCache

    log = open(sys.argv[2], "a")

    def slow(prompt):
        time.sleep(0.15)
        log.write(prompt + "\\n"); log.flush()
        return "summary of " + prompt

    llm = CachedLLM(inner=ScriptedLLM(slow), cache=LLMCache(sys.argv[1]))
    for i in range(20):
        llm.complete(f"chunk {i}")
    print("done", llm.usage.calls, llm.usage.cache_hits)
    """
)


def test_killed_build_resumes_without_repeating_finished_calls(tmp_path):
    script = tmp_path / "build.py"
    script.write_text(BUILD)
    db, log = tmp_path / "cache.sqlite", tmp_path / "calls.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(log)], env=env)
    deadline = time.time() + 60
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 6):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = log.read_text().splitlines()
    assert 6 <= len(first) < 20
    out = subprocess.run([sys.executable, str(script), str(db), str(log)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    # Each prompt reached the model once; at most the call in flight at the kill ran twice.
    assert set(calls) == {f"chunk {i}" for i in range(20)}
    assert len(calls) <= 21
    _, made, hits = out.stdout.split()
    assert int(hits) >= len(first) - 1 and int(made) + int(hits) == 20
