import pytest

from multihop_rag import backends
from multihop_rag.backends import Spec, ollama_host, parse_spec, resolve_embed_spec, resolve_llm_spec
from multihop_rag.errors import BackendError, BundledModelMissing
from multihop_rag.serving import bundled


def test_parse_specs():
    assert parse_spec("ollama:qwen2.5:7b-instruct") == Spec("ollama", "qwen2.5:7b-instruct")
    assert parse_spec("llamacpp:/m/x.gguf") == Spec("llamacpp", "/m/x.gguf")
    assert parse_spec("st:default", embedding=True) == Spec("st", "default")
    for bad in ("qwen", "vllm:qwen", "llamacpp:"):
        with pytest.raises(BackendError, match="bad LLM spec"):
            parse_spec(bad)
    with pytest.raises(BackendError, match="bad embedding spec"):
        parse_spec("llamacpp:x", embedding=True)


@pytest.mark.parametrize(
    ("env", "url"),
    [(None, "http://127.0.0.1:11434"), ("0.0.0.0", "http://127.0.0.1:11434"), ("gpu-box:8080", "http://gpu-box:8080"),
     ("https://ollama.internal", "https://ollama.internal:11434")],
)
def test_ollama_host_reads_env_like_ollama(monkeypatch, env, url):
    if env is None:
        monkeypatch.delenv("OLLAMA_HOST", raising=False)
    else:
        monkeypatch.setenv("OLLAMA_HOST", env)
    assert ollama_host() == url


def test_default_prefers_ready_ollama_then_embedded(monkeypatch):
    monkeypatch.delenv("MULTIHOP_RAG_LLM", raising=False)
    monkeypatch.delenv("MULTIHOP_RAG_EMBED", raising=False)
    monkeypatch.setattr(backends, "ollama_models", lambda **_: ["qwen2.5:7b-instruct", "nomic-embed-text:latest"])
    assert resolve_llm_spec() == Spec("ollama", "qwen2.5:7b-instruct")
    assert resolve_embed_spec() == Spec("ollama", "nomic-embed-text")
    monkeypatch.setattr(backends, "ollama_models", lambda **_: ["llama3:8b"])  # up, but lacks the model
    assert resolve_llm_spec() == Spec("llamacpp", "default")
    monkeypatch.setattr(backends, "ollama_models", lambda **_: None)  # down
    assert resolve_embed_spec() == Spec("st", "default")
    monkeypatch.setenv("MULTIHOP_RAG_LLM", "llamacpp:qwen2.5-coder-0.5b")
    assert resolve_llm_spec() == Spec("llamacpp", "qwen2.5-coder-0.5b")
    assert resolve_llm_spec("ollama:mistral") == Spec("ollama", "mistral")


def test_server_down_or_model_missing_says_how_to_fix(monkeypatch):
    monkeypatch.setattr(backends, "_ollama_tags", lambda *a, **k: None)
    with pytest.raises(BackendError, match="ollama serve"):
        backends.llama_index_llm("ollama:qwen2.5:7b-instruct")
    monkeypatch.setattr(backends, "_ollama_tags", lambda *a, **k: {"llama3:8b": "sha256:1"})
    with pytest.raises(BackendError, match="ollama pull qwen2.5:7b-instruct"):
        backends.chat_model("ollama:qwen2.5:7b-instruct")
    with pytest.raises(BackendError, match="ollama pull nomic"):
        backends.langchain_embeddings("ollama:nomic-embed-text")


def test_missing_local_files_are_clear_errors(tmp_path):
    with pytest.raises(BackendError, match="no GGUF file"):
        backends.llama_index_llm(f"llamacpp:{tmp_path}/none.gguf")
    with pytest.raises(BackendError, match="unknown bundled model"):
        backends.chat_model("llamacpp:gpt-5")
    with pytest.raises(BackendError, match="nothing is downloaded"):
        backends.llama_index_embedding("st:sentence-transformers/all-mpnet-base-v2")


def test_bundled_parts_missing_names_the_install(monkeypatch):
    monkeypatch.setitem(
        bundled.BUNDLED_LLMS,
        "ghost",
        bundled.BundledGGUF("ghost", "", ("no_such_package_xyz",), "data/*.bin", "0" * 64, "ghost.gguf"),
    )
    with pytest.raises(BundledModelMissing, match=r"multihop-rag\[embedded\]"):
        bundled.gguf_path("ghost")


def test_assembly_checks_sha(monkeypatch, tmp_path):
    pkg = tmp_path / "fake_model_pkg" / "data"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "part01.bin").write_bytes(b"abc")
    (pkg / "part02.bin").write_bytes(b"def")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("MULTIHOP_RAG_CACHE", str(tmp_path / "cache"))
    import hashlib

    good = bundled.BundledGGUF("t", "", ("fake_model_pkg",), "data/*.bin", hashlib.sha256(b"abcdef").hexdigest(), "t.gguf")
    monkeypatch.setitem(bundled.BUNDLED_LLMS, "t", good)
    path = bundled.gguf_path("t")
    assert path.read_bytes() == b"abcdef"
    assert bundled.gguf_path("t") == path
    monkeypatch.setattr(bundled, "DEFAULT_LLM_ALIAS", "t")  # "default" names the default alias everywhere
    assert bundled.gguf_path("default") == path
    bad = bundled.BundledGGUF("b", "", ("fake_model_pkg",), "data/*.bin", "0" * 64, "b.gguf")
    monkeypatch.setitem(bundled.BUNDLED_LLMS, "b", bad)
    with pytest.raises(BundledModelMissing, match="SHA-256"):
        bundled.gguf_path("b")
    assert not (tmp_path / "cache" / "models" / "b.gguf").exists()


def test_a_file_that_is_no_gguf_model_is_refused_before_anything_is_built(tmp_path):
    from multihop_rag.backends import llama_index_llm
    from multihop_rag.errors import BackendError

    garbage = tmp_path / "model.gguf"
    garbage.write_bytes(b"\x00" * 4096)
    with pytest.raises(BackendError, match="not a GGUF model file"):
        llama_index_llm(f"llamacpp:{garbage}")
