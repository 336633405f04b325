import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field

from integrations_tests.fakes import ScriptedLLM
from multihop_rag.llm.structured import (
    STATS,
    StructuredStats,
    agenerate_json,
    generate_json,
    generate_label,
    parse_json,
    parse_label,
    salvage,
    schema_token_budget,
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
    assert stats.as_dict() == {
        "calls": 1, "first_try": 0, "repaired": 0, "retried": 1, "salvaged": 0, "failed": 0, "truncated": 0, "thinking": 0
    }
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


def test_unconstrained_backend_gets_no_format_kwarg_but_a_token_cap():
    llm = ScriptedLLM([json.dumps(GOOD)])
    generate_json(llm, "p", Propositions)
    assert llm.calls_kwargs == [{"max_tokens": schema_token_budget(Propositions.model_json_schema())}]


class Fact(BaseModel):
    fact: str
    entities: list[str] = Field(default_factory=list, max_length=10)


class Facts(BaseModel):
    facts: list[Fact] = Field(default_factory=list, max_length=30)


TWO_FACTS = {"facts": [{"fact": "The Quern Viaduct spans the Lisk.", "entities": ["Quern Viaduct", "Lisk"]},
                       {"fact": "It was designed by Odile Brask in 1802.", "entities": ["Odile Brask"]}]}
CUT = json.dumps(TWO_FACTS)[:-40]  # the second fact's text is cut: '..."It was designed by Odile B'


def test_the_token_cap_is_sized_from_what_the_schema_allows():
    """Issue 21: SiReRAG's facts JSON was capped at 512 tokens; 30 facts with 10 entities need more."""
    budget = schema_token_budget(Facts.model_json_schema())
    assert budget > 30 * 40
    llm = ScriptedLLM([json.dumps(TWO_FACTS)])
    generate_json(llm, "p", Facts)
    assert llm.calls_kwargs[0]["max_tokens"] == budget


def test_a_reply_cut_at_the_limit_is_asked_again_with_twice_the_cap():
    stats = StructuredStats()
    llm = ScriptedLLM([(CUT, "length"), json.dumps(TWO_FACTS)])
    value = generate_json(llm, "Extract facts.", Facts, stats=stats, max_tokens=100)
    assert value == Facts.model_validate(TWO_FACTS)
    assert [k["max_tokens"] for k in llm.calls_kwargs] == [100, 200]
    assert "cut off" in llm.prompts[1]
    assert (stats.truncated, stats.retried, stats.repaired, stats.salvaged) == (1, 1, 0, 0)


def test_a_reply_cut_on_every_try_keeps_only_complete_items():
    """Issue 21: a cut reply was "repaired" into a list whose last fact was a fragment ("…designed the
    Kesh Bri") and counted as a success. Now the fragment is dropped and the reply counted apart."""
    stats = StructuredStats()
    llm = ScriptedLLM([(CUT, "length")] * 3)
    value = generate_json(llm, "Extract facts.", Facts, stats=stats, max_tokens=100)
    assert value == Facts(facts=[Fact.model_validate(TWO_FACTS["facts"][0])])
    assert (stats.truncated, stats.salvaged, stats.repaired, stats.first_try) == (3, 1, 0, 0)


def test_a_cut_reply_without_a_finish_reason_is_known_by_its_token_count():
    """A backend that reports no finish reason: a reply as long as the cap was cut."""
    stats = StructuredStats()
    long_cut = CUT  # ScriptedLLM counts words as tokens
    words = len(long_cut.split())

    class NoReason(ScriptedLLM):
        def complete(self, prompt, formatted=False, **kwargs):
            response = super().complete(prompt, formatted, **kwargs)
            response.raw = {"usage": response.raw["usage"]}
            return response

    llm = NoReason([long_cut] * 3)
    value = generate_json(llm, "p", Facts, stats=stats, max_tokens=words, retries=0)
    assert value is not None and len(value.facts) == 1 and stats.salvaged == 1


def test_a_cut_single_value_is_never_kept():
    """No list on the cut's path: the whole value is the fragment."""
    stats = StructuredStats()
    llm = ScriptedLLM([('{"answer": "The Quern Viad', "length")] * 3)

    class Answer(BaseModel):
        answer: str

    assert generate_json(llm, "p", Answer, stats=stats, max_tokens=10) is None
    assert stats.failed == 1 and stats.truncated == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"facts": [1, 2, 3', {"facts": [1, 2]}),
        ('{"a": 1, "facts": [{"x": [1, 2]}, {"x": [3', {"a": 1, "facts": [{"x": [1, 2]}]}),
        ('[{"a": "b"}, {"a": "c', [{"a": "b"}]),
        ('{"facts": [{"fact": "\\\\", "e": []}, {"fact": "\\', {"facts": [{"fact": "\\", "e": []}]}),
        ('{"answer": "frag', None),
        ("no json", None),
    ],
)
def test_salvage_keeps_the_complete_items_of_the_outermost_list(text, expected):
    assert salvage(text) == expected


def test_thinking_blocks_are_removed_before_parsing_and_counted():
    stats = StructuredStats()
    llm = ScriptedLLM(["<think>The user wants facts. Let me list them.</think>\n" + json.dumps(TWO_FACTS)])
    assert generate_json(llm, "p", Facts, stats=stats) == Facts.model_validate(TWO_FACTS)
    assert stats.thinking == 1 and stats.first_try == 1
    label_llm = ScriptedLLM(["<think>Is it? No wait, yes.</think> No"])
    assert generate_label(label_llm, "Enough?", stats=stats) == "No"
    assert stats.thinking == 2


def test_an_unclosed_thinking_block_leaves_nothing_to_parse():
    stats = StructuredStats()
    llm = ScriptedLLM([("<think>Let me think about the facts: the Quern", "length")] * 3)
    assert generate_json(llm, "p", Facts, stats=stats) is None
    assert stats.failed == 1 and stats.thinking == 3


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


def test_a_labels_probability_folds_case_and_spaces_and_ignores_other_tokens():
    import math

    from multihop_rag.llm.calls import first_token_logprobs
    from multihop_rag.llm.structured import label_probability

    alternatives = {"Yes": math.log(0.5), " yes": math.log(0.1), "No": math.log(0.2), "The": math.log(0.2)}
    assert label_probability(alternatives) == pytest.approx(0.6 / 0.8)
    assert label_probability({"The": -0.1}) is None and label_probability({}) is None
    openai = {"content": [{"token": "No", "logprob": -0.1, "top_logprobs": [{"token": "No", "logprob": -0.1},
                                                                           {"token": "Yes", "logprob": -2.4}]}]}
    ollama = [{"token": "No", "logprob": -0.1, "top_logprobs": [{"token": "No", "logprob": -0.1},
                                                                {"token": "Yes", "logprob": -2.4}]}]
    assert first_token_logprobs(openai) == first_token_logprobs(ollama) == {"No": -0.1, "Yes": -2.4}
    assert first_token_logprobs(None) == {} and first_token_logprobs({"content": []}) == {}


@pytest.mark.parametrize(
    ("text", "mid_way"),
    [
        ('{"facts": [{"fact": "Kesh Bridge spans the Or', True),
        ('{"facts": [{"fact": "A is B.", "entities": ["A"]}, {"fact": "C d', True),
        ('{"facts": [{"fact": "', True),
        ('{"facts": [{"fact": "A is B.", "entities": ["A"]}', False),  # only closers missing: repair adds them
        ('{"facts": []}', False),
        ("no JSON here", False),
    ],
)
def test_a_reply_that_stops_mid_way_is_known(text, mid_way):
    from multihop_rag.llm.structured import stops_mid_way

    assert stops_mid_way(text) is mid_way


def test_a_reply_that_stops_mid_way_without_saying_so_is_asked_again_never_kept_as_a_fragment():
    """A server that ends a reply mid-JSON with finish reason "stop": json_repair closed the open string and
    kept "Kesh Bridge spans the Or" as a fact. Now it is asked again; on every try, complete items only."""
    stats = StructuredStats()
    stopped = '{"facts": [{"fact": "Velmora lies on the Orrin.", "entities": ["Velmora"]}, {"fact": "Kesh Bridge spans the Or'
    llm = ScriptedLLM([stopped, json.dumps(TWO_FACTS)])
    assert generate_json(llm, "Extract facts.", Facts, stats=stats) == Facts.model_validate(TWO_FACTS)
    assert "stops mid-way" in llm.prompts[1] and stats.retried == 1
    again = StructuredStats()
    value = generate_json(ScriptedLLM([stopped] * 3), "Extract facts.", Facts, stats=again)
    assert value is not None and [f.fact for f in value.facts] == ["Velmora lies on the Orrin."]
    assert again.salvaged == 1
