"""The embedded model through both framework adapters."""

from llama_index.core.llms import ChatMessage
from pydantic import BaseModel, Field

from multihop_rag.llm.cache import CachedLLM
from multihop_rag.llm.structured import StructuredStats, generate_json, generate_label

PASSAGE = (
    "The Kesh Bridge is a seven-arch stone bridge in Velmora. It was designed by the civil engineer "
    "Tomas Halvard and completed in 1788."
)


class Facts(BaseModel):
    facts: list[str] = Field(max_length=5)
    entities: list[str] = Field(max_length=8)


def test_llama_index_adapter_answers_from_context(li_llm):
    response = li_llm.complete(f"{PASSAGE}\n\nWho designed the Kesh Bridge? Answer with a name only.")
    assert "Halvard" in response.text
    assert response.raw["usage"]["prompt_tokens"] > 20


def test_llama_index_chat_and_stream(li_llm):
    reply = li_llm.chat([ChatMessage(role="system", content="Answer in one word."), ChatMessage(role="user", content="What colour is snow?")])
    assert "white" in reply.message.content.lower()
    chunks = list(li_llm.stream_complete("Count from 1 to 3, separated by commas."))
    assert len(chunks) > 1 and "2" in chunks[-1].text


async def test_a_reply_stopped_after_n_lines_generates_no_more_and_frees_the_model(li_llm):
    limited = CachedLLM(inner=li_llm, cache=None).with_max_lines(2)
    prompt = "Count from 1 to 9, writing each number on its own line."
    for reply in (await limited.acomplete(prompt), limited.complete(prompt)):  # the model is not left locked between
        assert [line.strip() for line in reply.text.splitlines()] == ["1", "2"]
    assert limited.usage.completion_tokens <= 8  # "1", "\n", "2", "\n" twice, and no more
    assert li_llm.complete(prompt).text.count("\n") == 8


def test_langchain_adapter_invoke_stream_and_usage(lc_chat):
    message = lc_chat.invoke(f"{PASSAGE}\n\nIn which year was the bridge completed? Answer with the year only.")
    assert "1788" in message.text
    assert message.usage_metadata["input_tokens"] > 20
    assert "".join(c.text for c in lc_chat.stream("Say hello.")).strip()


async def test_async_calls_work_inside_a_running_loop(li_llm, lc_chat):
    assert (await li_llm.acomplete("Reply with the word ok.")).text.strip()
    assert (await lc_chat.ainvoke("Reply with the word ok.")).text.strip()


def test_constrained_json_is_valid_first_time_on_both(li_llm, lc_chat):
    for llm in (li_llm, lc_chat):
        stats = StructuredStats()
        value = generate_json(llm, f"List the facts and named entities of this passage.\n\n{PASSAGE}", Facts, stats=stats)
        assert value is not None and value.facts
        assert any("Halvard" in e for e in value.entities)
        assert stats.failed == 0 and stats.retried == 0


def test_constrained_label(lc_chat):
    prompt = f"{PASSAGE}\n\nDoes the passage say who designed the bridge? Answer Yes or No."
    assert generate_label(lc_chat, prompt) == "Yes"


def test_greedy_grammar_replies_as_response_format_does_at_unconstrained_speed(li_llm):
    """Issue 24: the grammar asked about the greedy token first gives llama-cpp-python's constrained reply.

    Both are compared after the prompt is in the model's cache (llama-cpp-python's first call of a
    prompt evaluates it differently from a repeat, with other rounding)."""
    from llama_cpp import LogitsProcessorList

    from multihop_rag.serving.llamacpp import load_llama
    from multihop_rag.serving.llamacpp_grammar import GreedyGrammar

    llama, lock = load_llama(li_llm.model_path, li_llm.context_window)
    schema = Facts.model_json_schema()
    messages = [{"role": "user", "content": f"List the facts and named entities of this passage as JSON.\n\n{PASSAGE}"}]
    options = {"messages": messages, "max_tokens": 200, "temperature": 0.0, "seed": 0}
    with lock:
        replies = [llama.create_chat_completion(**options, response_format={"type": "json_object", "schema": schema})
                   for _ in range(2)]
        grammar = GreedyGrammar(llama, schema)
        try:
            ours = llama.create_chat_completion(**options, logits_processor=LogitsProcessorList([grammar]))
        finally:
            grammar.close()
    text = ours["choices"][0]["message"]["content"]
    assert text == replies[1]["choices"][0]["message"]["content"]
    assert Facts.model_validate_json(text).facts
    assert grammar.tokens == ours["usage"]["completion_tokens"] + 1  # and the end-of-turn token
    assert grammar.full_checks < grammar.tokens / 4  # the whole vocabulary was checked for few tokens


def test_sampled_json_keeps_llama_cpp_python_constraint(lc_chat):
    """Above temperature 0 the reply is held to the schema by ``response_format``."""
    message = lc_chat.invoke(f"List the facts and named entities of this passage.\n\n{PASSAGE}",
                             format=Facts.model_json_schema(), temperature=0.7)
    assert Facts.model_validate_json(message.text).entities


def test_the_first_tokens_logprobs_come_from_the_row_sampled_from(lc_chat):
    """Issue 40: the ReSP judge reads P(Yes); llama-cpp-python gives logprobs only with logits_all (GBs)."""
    import math

    from multihop_rag.llm.calls import Call, call
    from multihop_rag.llm.structured import label_probability

    prompt = f"{PASSAGE}\n\nWas the Kesh Bridge designed by Tomas Halvard? Reply Yes or No."
    reply = call(Call(lc_chat, prompt, max_tokens=1, top_logprobs=5))
    alternatives = reply.first_token_logprobs
    assert len(alternatives) == 5 and list(alternatives.values()) == sorted(alternatives.values(), reverse=True)
    assert next(iter(alternatives)) == reply.text  # greedy: the reply is the most likely token
    assert 1.0 >= sum(math.exp(v) for v in alternatives.values()) > 0.5
    assert label_probability(alternatives) > 0.5
    assert call(Call(lc_chat, prompt, max_tokens=1)).first_token_logprobs == {}


def test_the_llama_index_adapter_reads_the_same_first_token_logprobs_and_caches_them(li_llm, lc_chat, tmp_path):
    """Issue 41: GARLIC's Yes/No reads P(Yes) through the LlamaIndex adapter, as ReSP's judge does through LangChain's."""
    from multihop_rag.llm.cache import LLMCache
    from multihop_rag.llm.calls import Call, call

    prompt = f"{PASSAGE}\n\nWas the Kesh Bridge designed by Tomas Halvard? Reply Yes or No."
    langchain = call(Call(lc_chat, prompt, max_tokens=1, top_logprobs=5)).first_token_logprobs
    cached = CachedLLM(inner=li_llm, cache=LLMCache(tmp_path / "calls.sqlite"))
    made, replayed = (call(Call(cached, prompt, max_tokens=1, top_logprobs=5)).first_token_logprobs for _ in range(2))
    assert len(made) == 5 and made == replayed and cached.usage.cache_hits == 1
    assert made.keys() == langchain.keys() and all(abs(made[t] - langchain[t]) < 1e-3 for t in made)


def test_prompt_lookup_decoding_runs_and_answers(li_llm):
    """Issue 42: prompt-lookup speculative decoding (``prompt_lookup=``) drafts tokens from the prompt. llama-cpp-python
    sized its logits for a drafting model by the ``logits_all`` argument alone, so the first call longer than a batch
    crashed (a broadcast error); the reply is not bit-for-bit the plain model's (batched verification rounds
    otherwise: 9 of 12 proposition replies equal on the 1.5B), so it is checked for its content."""
    from multihop_rag.serving.llamacpp import LlamaCppLLM

    drafting = LlamaCppLLM(model_path=li_llm.model_path, context_window=2048, prompt_lookup=8)
    reply = drafting.complete(f"{PASSAGE * 16}\n\nWho designed the Kesh Bridge? Answer with a name only.").text
    assert "Halvard" in reply
    facts = generate_json(drafting, f"List the facts and named entities of this passage as JSON.\n\n{PASSAGE}", Facts)
    assert facts is not None and facts.facts


def test_a_prompt_reopening_an_earlier_one_after_other_calls_reads_only_its_new_tokens(li_llm, monkeypatch):
    """Issue 40: on two cores reading the prompt is most of a call's time, and HiRAG's Decomposer dialogue and
    few-shot prompts reopen what an earlier call read after other calls came between. The in-process model keeps
    recent prompts' states (llama-cpp-python's ``LlamaRAMCache``): such a call reads only its new tokens. Its reply is
    checked for its content, not bit for bit: logits computed over a restored prefix differ in the last bits, which
    flips a near-tie token now and then (5 of 120 identical prompts on HiRAG's tuning questions, the 1.5B)."""
    import llama_cpp

    from multihop_rag.serving.llamacpp import LlamaCppLLM, load_llama

    def ask(llm: LlamaCppLLM, question: str) -> tuple[str, int]:
        llama, _ = load_llama(llm.model_path, llm.context_window)
        llama_cpp.llama_perf_context_reset(llama.ctx)
        text = llm.complete(f"{PASSAGE * 8}\n\n{question}", max_tokens=16).text
        return text, llama_cpp.llama_perf_context(llama.ctx).n_p_eval

    ask(li_llm, "Who designed the Kesh Bridge? Answer with a name only.")
    li_llm.complete("Name a colour.", max_tokens=16)
    reply, read = ask(li_llm, "When was the Kesh Bridge completed? Answer with a year only.")
    assert read < li_llm.count_tokens(PASSAGE * 8) / 4
    monkeypatch.setenv("MULTIHOP_RAG_PROMPT_CACHE_MB", "0")
    uncached = LlamaCppLLM(model_path=li_llm.model_path, context_window=4096)
    ask(uncached, "Who designed the Kesh Bridge? Answer with a name only.")
    uncached.complete("Name a colour.", max_tokens=16)
    uncached_reply, uncached_read = ask(uncached, "When was the Kesh Bridge completed? Answer with a year only.")
    assert uncached_read > li_llm.count_tokens(PASSAGE * 8)
    assert "1788" in reply and "1788" in uncached_reply
