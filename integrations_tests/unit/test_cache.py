import os
import subprocess
import sys
import textwrap

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.base.llms.types import ChatMessage

from integrations_tests.fakes import ScriptedLLM
from integrations_tests.killing import REPO, kill_when
from multihop_rag.backends import OllamaLLM
from multihop_rag.llm.cache import CachedLLM, LLMCache, SQLiteChatCache, cache_key, cached_llm, model_identity
from multihop_rag.llm.calls import Call, call
from multihop_rag.serving.llamacpp import LlamaCppLLM


def test_key_depends_on_model_prompt_and_params():
    assert cache_key("m", "p", {"t": 0}) == cache_key("m", "p", {"t": 0})
    assert len({cache_key("m", "p"), cache_key("m2", "p"), cache_key("m", "p2"), cache_key("m", "p", {"t": 1})}) == 4


def _ollama(**changes):
    settings = {"model": "qwen3:8b", "base_url": "http://127.0.0.1:11434", "digest": "sha256:aaa",
                "context_window": 8192, "additional_kwargs": {"num_predict": 512, "seed": 0}} | changes
    return OllamaLLM(**settings)


def test_the_key_holds_everything_that_changes_an_output():
    """Issue 21: Ollama's num_predict, the base URL, the model's digest and the context size were not
    in the key (512 and 4096 max tokens gave the same key). Timeouts are not part of it."""
    base = cache_key(model_identity(_ollama()), "p")
    changed = [
        _ollama(additional_kwargs={"num_predict": 4096, "seed": 0}),
        _ollama(base_url="http://10.0.0.2:11434"),
        _ollama(digest="sha256:bbb"),
        _ollama(context_window=32768),
        _ollama(thinking=False),
    ]
    keys = {cache_key(model_identity(llm), "p") for llm in changed}
    assert base not in keys and len(keys) == len(changed)
    assert cache_key(model_identity(_ollama(request_timeout=5.0)), "p") == base
    # Per-call parameters (a JSON schema, a token cap) are part of the key too.
    assert cache_key(model_identity(_ollama()), "p", {"format": {"type": "object"}}) != base


def test_a_gguf_model_is_known_by_its_content(tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"weights one")
    b.write_bytes(b"weights two")
    ids = [model_identity(LlamaCppLLM(model_path=str(p)))["digest"] for p in (a, b)]
    assert ids[0] != ids[1] and len(ids[0]) == 64


def test_empty_replies_and_errors_are_never_cached(tmp_path):
    """Issue 21: an empty reply was cached forever, so a re-run never asked again."""
    answers = iter(["", "filled"])
    llm = CachedLLM(inner=ScriptedLLM(lambda p: next(answers)), cache=LLMCache(tmp_path / "c.sqlite"))
    assert llm.complete("q").text == ""
    assert llm.complete("q").text == "filled"
    assert llm.complete("q").text == "filled" and llm.usage.cache_hits == 1

    def fail(prompt):
        raise ConnectionError("server gone")

    broken = CachedLLM(inner=ScriptedLLM(fail), cache=LLMCache(tmp_path / "c.sqlite"))
    for _ in range(2):
        try:
            broken.complete("other")
        except ConnectionError:
            pass
    assert len(broken.cache) == 1  # only "filled"


def test_a_cut_reply_comes_back_from_the_cache_as_cut(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    first = CachedLLM(inner=ScriptedLLM([("half a sent", "length")]), cache=cache)
    assert call(Call(first, "q")).truncated
    again = CachedLLM(inner=ScriptedLLM([]), cache=cache)
    reply = call(Call(again, "q"))
    assert reply.text == "half a sent" and reply.truncated and again.usage.cache_hits == 1


def test_no_cache_unless_one_is_given(tmp_path, monkeypatch):
    """Issue 21: the default was one global SQLite file keeping a copy of every corpus."""
    monkeypatch.setenv("MULTIHOP_RAG_CACHE", str(tmp_path / "global"))
    llm = cached_llm(ScriptedLLM(lambda p: "x"), None)
    llm.complete("q")
    llm.complete("q")
    assert llm.cache is None and llm.usage.calls == 2 and not (tmp_path / "global").exists()
    stored = cached_llm(ScriptedLLM(lambda p: "x"), tmp_path / "index" / "llm_calls.sqlite")
    assert stored.cache.describe()["path"] == str(tmp_path / "index" / "llm_calls.sqlite")


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
    cache = SQLiteChatCache(tmp_path / "lc.sqlite", identity="gguf:aaa")
    first = GenericFakeChatModel(messages=iter([AIMessage(content="one")]), cache=cache)
    assert first.invoke("q").content == "one"
    second_cache = SQLiteChatCache(tmp_path / "lc.sqlite", identity="gguf:aaa")
    second = GenericFakeChatModel(messages=iter([]), cache=second_cache)
    assert second.invoke("q").content == "one" and second_cache.hits == 1
    # Other weights under the same LangChain description: no hit.
    other = GenericFakeChatModel(messages=iter([AIMessage(content="two")]), cache=SQLiteChatCache(tmp_path / "lc.sqlite", identity="gguf:bbb"))
    assert other.invoke("q").content == "two"


def test_langchain_cache_skips_empty_generations(tmp_path):
    cache = SQLiteChatCache(tmp_path / "lc.sqlite")
    empty = GenericFakeChatModel(messages=iter([AIMessage(content=""), AIMessage(content="full")]), cache=cache)
    assert empty.invoke("q").content == ""
    assert empty.invoke("q").content == "full"


BUILD = textwrap.dedent(
    """
    import sys, time
    from integrations_tests.fakes import ScriptedLLM
    from multihop_rag.llm.cache import CachedLLM, LLMCache

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
    kill_when([str(script), str(db), str(log)], lambda: log.exists() and len(log.read_text().splitlines()) >= 6, timeout=60)
    first = log.read_text().splitlines()
    assert 6 <= len(first) < 20
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(script), str(db), str(log)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    # Each prompt reached the model once; at most the call in flight at the kill ran twice.
    assert set(calls) == {f"chunk {i}" for i in range(20)}
    assert len(calls) <= 21
    _, made, hits = out.stdout.split()
    assert int(hits) >= len(first) - 1 and int(made) + int(hits) == 20


def test_a_cached_reply_keeps_its_first_token_logprobs(tmp_path):
    """The ReSP judge's P(Yes) replays from a committed cache as it was computed."""
    import math

    from integrations_tests.fakes import ScriptedChatModel

    alternatives = {"Yes": math.log(0.7), "No": math.log(0.3)}
    model = ScriptedChatModel(lambda prompt: ("Yes", "stop", alternatives), cache=SQLiteChatCache(tmp_path / "c.sqlite"))
    first, replayed = (call(Call(model, "Enough?", max_tokens=1, top_logprobs=5)) for _ in range(2))
    assert first.first_token_logprobs == replayed.first_token_logprobs == alternatives and len(model.prompts) == 1
    assert call(Call(model, "Enough?", max_tokens=1)).first_token_logprobs == {} and len(model.prompts) == 2


def test_a_llama_index_reply_keeps_its_first_token_logprobs_through_the_cache(tmp_path):
    """Issue 41: GARLIC's Yes/No reads P(Yes) as ReSP's judge does, through a LlamaIndex LLM; the alternatives come
    back on the call and replay from a committed cache."""
    import math

    alternatives = {"Yes": math.log(0.6), "No": math.log(0.4)}
    inner = ScriptedLLM(lambda prompt: ("Yes", "stop", alternatives))
    model = CachedLLM(inner=inner, cache=LLMCache(tmp_path / "c.sqlite"))
    first, replayed = (call(Call(model, "Enough?", max_tokens=1, top_logprobs=5)) for _ in range(2))
    assert first.first_token_logprobs == replayed.first_token_logprobs == alternatives and len(inner.prompts) == 1
    assert inner.calls_kwargs[0]["top_logprobs"] == 5
    assert call(Call(model, "Enough?", max_tokens=1)).first_token_logprobs == {} and len(inner.prompts) == 2


def test_a_setting_added_later_keeps_older_caches_replaying_while_it_is_off(tmp_path):
    """``prompt_lookup`` joined the embedded model's settings after the run of record's caches were committed: in
    every key it made each cached call a miss (the 2Wiki naive rows ran their calls again). Off, it is left out of
    the keys; on, it is in them (its replies differ)."""
    from multihop_rag.llm.cache import model_identity
    from multihop_rag.serving.llamacpp import LlamaCppChatModel, LlamaCppLLM

    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"weights")
    assert "prompt_lookup" not in model_identity(LlamaCppLLM(model_path=str(weights)))
    assert model_identity(LlamaCppLLM(model_path=str(weights), prompt_lookup=10))["prompt_lookup"] == 10
    assert "prompt_lookup" not in LlamaCppChatModel(model_path=str(weights))._get_llm_string()
    assert "prompt_lookup" in LlamaCppChatModel(model_path=str(weights), prompt_lookup=10)._get_llm_string()


def test_a_line_limit_stops_the_reply_keys_it_and_replays_a_reply_cached_without_it(tmp_path):
    """A reply stopped after n lines is keyed with n; a reply cached whole replays cut to n lines with no call (greedy
    decoding generates the same first lines either way); the limited view counts into the same usage."""
    reply = "(a, is, b)\n\n(c, is, d)\n(e, is, f)\n(g, is, h)"
    inner = ScriptedLLM(lambda prompt: reply)
    whole = CachedLLM(inner=inner, cache=LLMCache(tmp_path / "c.sqlite"))
    limited = whole.with_max_lines(2)
    assert limited.complete("p").text == "(a, is, b)\n\n(c, is, d)"
    assert inner.streamed == 3 and len(inner.prompts) == 1
    assert limited.complete("p").text == "(a, is, b)\n\n(c, is, d)"  # its own key now
    assert whole.complete("p").text == reply and len(inner.prompts) == 2  # ... which the whole reply does not share
    assert whole.with_max_lines(3).complete("p").text == "(a, is, b)\n\n(c, is, d)\n(e, is, f)"
    assert len(inner.prompts) == 2 and inner.streamed == 3  # cut from the whole reply, no call
    assert whole.usage.calls == 2 and whole.usage.cache_hits == 2
    assert whole.with_max_lines(9).complete("q").text == reply  # fewer lines than the limit: the whole reply


def test_a_sentence_limit_stops_the_reply_at_a_sentence_end_keys_it_and_replays_a_reply_cached_without_it(tmp_path):
    """A reply stopped after n sentences ends where the n-th does (Punkt: "U.S." followed by a lower-case word ends
    none), is known to have ended only once the next begins, is keyed with n, and a reply cached whole replays cut."""
    reply = "He moved to the U.S. in 1990.\nHe taught there.\nLater he left.\nHe died."
    inner = ScriptedLLM(lambda prompt: reply)
    whole = CachedLLM(inner=inner, cache=LLMCache(tmp_path / "c.sqlite"))
    assert whole.with_max_sentences(2).complete("p").text == "He moved to the U.S. in 1990.\nHe taught there."
    assert inner.streamed == 3 and len(inner.prompts) == 1  # the third sentence begun, the fourth never generated
    assert whole.complete("p").text == reply and len(inner.prompts) == 2  # the whole reply has its own key
    assert whole.with_max_sentences(1).complete("p").text == "He moved to the U.S. in 1990."
    assert whole.with_max_sentences(4).complete("p").text == reply  # no more sentences than the limit: all of it
    assert len(inner.prompts) == 2 and whole.usage.cache_hits == 2  # both cut from the whole reply, no call


async def test_a_line_limit_stops_async_and_chat_replies(tmp_path):
    inner = ScriptedLLM(lambda prompt: "one\ntwo\nthree")
    limited = CachedLLM(inner=inner, cache=None).with_max_lines(1)
    assert (await limited.acomplete("p")).text == "one"
    assert (await limited.achat([ChatMessage(role="user", content="p")])).message.content == "one"
    assert limited.chat([ChatMessage(role="user", content="p")]).message.content == "one"
    assert inner.streamed == 3  # one line of each of three replies
