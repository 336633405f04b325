"""Few-shot examples never use entities of the bundled demo corpus or of the datasets (issue 22: the
HiRAG examples answered the demo's first hop inside the prompt, and small models copied them)."""

import re
from functools import cache
from importlib import resources

import pytest

import langchain_resp.prompts
import langgraph_hirag.prompts
import llama_index_garlic.prompts
import llama_index_k2rag.prompts
import llama_index_sirerag.prompts
from multihop_rag.corpus import data_dir, load_demo
from multihop_rag.errors import CorpusError

PROMPT_MODULES = [
    langgraph_hirag.prompts,
    llama_index_sirerag.prompts,
    langchain_resp.prompts,
    llama_index_garlic.prompts,
    llama_index_k2rag.prompts,
]


def prompt_text(module) -> str:
    return "\n".join(str(v) for k, v in vars(module).items() if k.isupper())


@cache
def data_text() -> str:
    bundled = resources.files("multihop_rag") / "data"
    texts = [(bundled / name).read_text() for name in ("demo_corpus.jsonl", "demo_questions.jsonl")]
    try:
        folder = data_dir()
    except CorpusError:
        pytest.skip("no shared/data folder here")
    texts += [path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.jsonl"))]
    return "\n".join(texts)


@pytest.mark.parametrize("module", [m for m in PROMPT_MODULES if hasattr(m, "EXAMPLE_ENTITIES")], ids=lambda m: m.__name__)
def test_example_entities_appear_in_their_prompts_and_in_no_corpus_or_dataset(module):
    prompts = prompt_text(module)
    for entity in module.EXAMPLE_ENTITIES:
        assert entity in prompts, f"{entity!r} is declared but not in {module.__name__}"
        found = re.search(rf"\b{re.escape(entity)}\b", data_text(), flags=re.IGNORECASE)
        assert found is None, f"{entity!r} of {module.__name__} appears in the data: …{data_text()[found.start() - 60 : found.end() + 60]}…"


@pytest.mark.parametrize("module", PROMPT_MODULES, ids=lambda m: m.__name__)
def test_no_prompt_names_a_demo_corpus_entity(module):
    passages, _ = load_demo()
    prompts = prompt_text(module)
    for title in {p.title for p in passages}:
        assert not re.search(rf"\b{re.escape(title)}\b", prompts), f"{module.__name__} names {title!r} of the demo corpus"


def test_every_reader_asks_for_a_short_answer_in_naive_rags_words_over_whatever_evidence_it_has():
    # naive RAG's prompt, byte for byte as every committed call cache recorded it, and HiRAG's short Summarizer's
    from multihop_rag.short_answer import short_answer_prompt

    naive = "Passages:\nP\n\nUsing the passages, answer the question in as few words as possible.\nQuestion: Q?\nAnswer: "
    assert short_answer_prompt("Q?", docs="P") == naive == short_answer_prompt("Q?", docs="P", known="")
    assert short_answer_prompt("Q?", known="K").startswith("Known information: K\n\nUsing the known information, answer")
    both = short_answer_prompt("Q?", docs="P", known="K")
    assert both.index("Passages:\nP") < both.index("Known information: K") < both.index("Using the passages and the known")
    assert short_answer_prompt("Q?").startswith("Passages:\n\n")  # nothing at all: naive's, with no passages
