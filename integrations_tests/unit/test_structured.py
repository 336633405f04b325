import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field

from integrations_tests.fakes import ScriptedLLM
from multihop_rag.structured import (
    STATS,
    StructuredStats,
    agenerate_json,
    generate_json,
    generate_label,
    parse_json,
    parse_label,
)


class Proposition(BaseModel):
    text: str
    entities: list[str] = Field(max_length=8)


class Propositions(BaseModel):
    propositions: list[Proposition] = Field(max_length=20)


GOOD = {"propositions": [{"text": "Velmora lies on the Orrin.", "entities": ["Velmora", "Orrin"]}]}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD) + "\n```",
        "Sure! Here is the JSON:\n" + json.dumps(GOOD) + "\nHope this helps.",
        json.dumps(GOOD).replace('"', "'"),
        json.dumps(GOOD)[:-2],  # truncated: missing "]}"
        json.dumps(GOOD).replace("]}]}", "],}],}"),  # trailing commas
    ],
)
def test_repairs_common_breakage(text):
    value, _ = parse_json(text, Propositions)
    assert value == Propositions.model_validate(GOOD)


def test_hopeless_text_raises():
    with pytest.raises(ValueError):
        parse_json("I cannot answer that.", Propositions)
    with pytest.raises(ValueError):
        parse_json('{"wrong": 1}', Propositions)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.text(max_size=40),
    st.integers(min_value=0, max_value=len(json.dumps(GOOD))),
    st.sampled_from(["", "```", "\n\nDone.", "}}}", "]"]),
)
def test_fuzzed_outputs_never_raise_anything_but_valueerror(prefix, cut, suffix):
    text = prefix + json.dumps(GOOD)[:cut] + suffix
    try:
        value, _ = parse_json(text, Propositions)
    except ValueError:
        return
    assert isinstance(value, Propositions)


def test_retry_then_success_is_counted_and_prompt_says_what_was_wrong():
    stats = StructuredStats()
    llm = ScriptedLLM(["no JSON here", json.dumps(GOOD)])
    value = generate_json(llm, "Extract propositions.", Propositions, stats=stats)
    assert value == Propositions.model_validate(GOOD)
    assert stats.as_dict() == {"calls": 1, "first_try": 0, "repaired": 0, "retried": 1, "failed": 0}
    assert "could not be used" in llm.prompts[1] and "maxItems" in llm.prompts[1]


def test_gives_up_with_warning_and_counter(caplog):
    stats = StructuredStats()
    before = STATS.failed
    llm = ScriptedLLM(["nope"] * 3)
    with caplog.at_level(logging.WARNING):
        assert generate_json(llm, "p", Propositions, retries=2, stats=stats, what="chunk 7") is None
    assert len(llm.prompts) == 3
    assert stats.failed == 1 and STATS.failed == before + 1
    assert "chunk 7" in caplog.text


def test_unconstrained_backend_gets_no_format_kwarg():
    llm = ScriptedLLM([json.dumps(GOOD)])
    generate_json(llm, "p", Propositions)
    assert llm.calls_kwargs == [{}]


def test_langchain_chat_models_work_too():
    chat = GenericFakeChatModel(messages=iter([AIMessage(content="```json\n" + json.dumps(GOOD) + "```")]))
    stats = StructuredStats()
    assert generate_json(chat, "p", Propositions, stats=stats) is not None
    assert stats.repaired == 1


async def test_async_version():
    llm = ScriptedLLM(["{bad", json.dumps(GOOD)])
    assert await agenerate_json(llm, "p", Propositions) == Propositions.model_validate(GOOD)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ('{"answer": "Yes"}', "Yes"),
        ("No.", "No"),
        ("**Yes**, the passage says so.", "Yes"),
        ("The answer is no", "No"),
        ("yes", "Yes"),
        ("Nobody knows", None),
        ("", None),
    ],
)
def test_parse_label(text, label):
    assert parse_label(text, ("Yes", "No")) == label


def test_label_falls_back_to_default_and_counts(caplog):
    stats = StructuredStats()
    llm = ScriptedLLM(["I am not sure."])
    assert generate_label(llm, "Enough?", default="No", stats=stats) == "No"
    assert stats.failed == 1
