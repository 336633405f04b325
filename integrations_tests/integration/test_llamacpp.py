"""The embedded model through both framework adapters."""

from llama_index.core.llms import ChatMessage
from pydantic import BaseModel, Field

from multihop_rag.structured import StructuredStats, generate_json, generate_label

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
