"""GraphRAG as K²RAG's knowledge graph: the configuration written in code and the embedding
adapter, checked against the pinned GraphRAG without any model or network."""

from __future__ import annotations

import pytest

pytest.importorskip("graphrag", reason="the 'graphrag' extra is not installed")

from integrations_tests.fakes import HashEmbedding
from llama_index_k2rag.graphrag_kg import GraphRAGKG, extraction_grammar
from multihop_rag.serving.llamacpp_server import OpenAIEndpoint

ENDPOINT = OpenAIEndpoint(api_base="http://127.0.0.1:9/v1", model="local")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return GraphRAGKG(tmp_path_factory.mktemp("graphrag"), ENDPOINT, HashEmbedding(dim=24), context_tokens=4096)


def test_config_points_graphrag_at_the_endpoint_and_the_papers_chunks(graph):
    config = graph.config
    chat = config.get_completion_model_config("default_completion_model")
    assert (chat.model_provider, chat.model, chat.api_base) == ("openai", "local", "http://127.0.0.1:9/v1")
    assert (config.chunking.size, config.chunking.overlap) == (300, 100)  # K²RAG's KG chunks (§3.1.2)
    assert config.concurrent_requests == 1
    assert config.vector_store.vector_size == 24  # the embedding model's dimension, not OpenAI's
    assert config.local_search.max_context_tokens == 2048  # half the model's window
    assert config.community_reports.max_input_length == 2048
    for folder in (config.output_storage.base_dir, config.cache.storage.base_dir, config.vector_store.db_uri):
        assert str(graph.root) in str(folder)


def test_settings_override_generated_values(tmp_path):
    graph = GraphRAGKG(tmp_path, ENDPOINT, HashEmbedding(dim=8), settings={"extract_graph": {"max_gleanings": 0}})
    assert graph.config.extract_graph.max_gleanings == 0
    assert graph.config.chunking.size == 300


def test_requests_in_flight_follow_the_servers_slots(tmp_path):
    """Issue 24: GraphRAG keeps as many requests in flight as the index's max_concurrency (K²RAG passes it)."""
    assert GraphRAGKG(tmp_path, ENDPOINT, HashEmbedding(dim=8)).config.concurrent_requests == 1
    assert GraphRAGKG(tmp_path, ENDPOINT, HashEmbedding(dim=8), max_concurrency=4).config.concurrent_requests == 4


def test_embeddings_go_through_the_llama_index_model(graph):
    from graphrag_llm.embedding import create_embedding

    embed = HashEmbedding(dim=24)
    model = create_embedding(graph.config.get_embedding_model_config("default_embedding_model"))
    response = model.embedding(input=["Ada Lovelace", "Charles Babbage"])
    assert response.embeddings == [embed.get_text_embedding("Ada Lovelace"), embed.get_text_embedding("Charles Babbage")]


def test_a_graph_that_was_never_built_says_so(graph):
    with pytest.raises(FileNotFoundError, match="build the graph first"):
        graph.query("Who designed the Analytical Engine?")


def test_building_nothing_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one chunk"):
        GraphRAGKG.build([], ENDPOINT, HashEmbedding(dim=8), root=tmp_path, show_progress=False)


def test_llama_cpp_endpoints_constrain_extraction_to_graphrags_record_format(tmp_path):
    import llama_cpp

    endpoint = OpenAIEndpoint(api_base="http://127.0.0.1:9/v1", model="local", grammar=True)
    settings = {"extract_graph": {"entity_types": ["person", "band"]}}
    config = GraphRAGKG(tmp_path, endpoint, HashEmbedding(dim=8), settings=settings).config
    assert config.extract_graph.completion_model_id == "graph_extraction_model"
    grammar = config.get_completion_model_config("graph_extraction_model").call_args["extra_body"]["grammar"]
    assert grammar == extraction_grammar(["person", "band"])
    assert '"PERSON" | "BAND"' in grammar and '"<|>" strength ")"' in grammar  # the field small models drop
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # valid GBNF
    # The other workflows (JSON community reports, free-text answers) stay unconstrained.
    assert "extra_body" not in config.get_completion_model_config("default_completion_model").call_args


def test_other_endpoints_get_no_grammar(graph):
    assert graph.config.extract_graph.completion_model_id == "default_completion_model"
    assert "graph_extraction_model" not in graph.config.completion_models
    assert graph.config.get_completion_model_config("default_completion_model").call_args["max_tokens"] == 512


def test_the_context_of_a_local_search_is_its_tables_as_text(tmp_path, monkeypatch):
    """K²RAG's kg_step="context" (issue 41) reads what local search wrote its answer from, not the answer."""
    import pandas as pd

    graph = GraphRAGKG(tmp_path, ENDPOINT, HashEmbedding(dim=8))
    tables = {"entities": pd.DataFrame({"entity": ["TOMAS HALVARD"], "description": ["designed the Kesh Bridge"]}),
              "claims": pd.DataFrame()}

    async def local_search(**kwargs):
        assert kwargs["query"] == "Who designed the Kesh Bridge?"
        return "Tomas Halvard", tables

    async def no_tables(self):
        return {}

    monkeypatch.setattr(GraphRAGKG, "_load_tables", no_tables)
    monkeypatch.setattr(graph.api, "local_search", local_search)
    context = graph.context("Who designed the Kesh Bridge?")
    assert context == "-----entities-----\nentity|description\nTOMAS HALVARD|designed the Kesh Bridge\n"
    assert graph.query("Who designed the Kesh Bridge?") == "Tomas Halvard"
