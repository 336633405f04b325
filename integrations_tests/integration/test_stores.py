"""Naive RAG on real embeddings in ChromaDB: persistent folder (reloaded by a new process) and server."""

import json
import subprocess
import sys

from multihop_rag.corpus import load_dataset
from multihop_rag.naive import NaiveRAG
from multihop_rag.stores import chroma_client


def test_persistent_store_builds_resumes_and_reloads_in_a_new_process(tmp_path, li_llm, li_embed):
    passages, questions = load_dataset("hotpotqa", "smoke")
    store = tmp_path / "store"
    NaiveRAG.build(passages[:40], llm=li_llm, embed_model=li_embed, store=store, show_progress=False)
    # A second build over the whole corpus embeds only what is missing.
    rag = NaiveRAG.build(passages, llm=li_llm, embed_model=li_embed, store=store, show_progress=False)
    assert len(rag) == len(passages)
    script = f"""
import json
from multihop_rag.backends import llama_index_embedding
from multihop_rag.naive import NaiveRAG
from integrations_tests.fakes import ScriptedLLM
rag = NaiveRAG.load(llm=ScriptedLLM(lambda p: "x"), embed_model=llama_index_embedding("st:default"), store={str(store)!r})
print(json.dumps([[e.id for e in rag.answer(q).evidence] for q in {[q.question for q in questions]!r}]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    retrieved = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(len(ids) == 5 for ids in retrieved)
    # Real embeddings find at least one gold passage in the top 5 for most questions.
    hits = [bool(set(q.supporting) & set(ids)) for q, ids in zip(questions, retrieved, strict=True)]
    assert sum(hits) >= 7, hits


def test_chroma_server_store(chroma_server, li_llm, li_embed):
    passages, questions = load_dataset("2wikimultihopqa", "smoke")
    NaiveRAG.build(passages, llm=li_llm, embed_model=li_embed, store=chroma_server, collection="wiki", show_progress=False)
    assert chroma_client(chroma_server).get_collection("wiki").count() == len(passages)
    reloaded = NaiveRAG.load(llm=li_llm, embed_model=li_embed, store=chroma_server, collection="wiki")
    answer = reloaded.answer(questions[0].question)
    assert answer.text and len(answer.evidence) == 5
    assert set(questions[0].supporting) & {e.id for e in answer.evidence}
