"""A GGUF's weights unpacked once into a safetensors folder in the cache, so that later loads map the file.

transformers unpacks a GGUF at every load (tens of seconds) and holds the file, the float32 tensors it
unpacks and the model's copy at once: loading the 1.5B for GARLIC's attention peaked at 5.8 GB of RSS for
a model that then holds 4.1 GB (issue 41). :func:`unpacked_weights` unpacks the file once, in a child
process (its peak goes back to the system when it ends), into a folder of safetensors in the weights'
dtype; a load from that folder maps the file instead of copying it, unpacks nothing, and gives the same
weights bit for bit.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

from multihop_rag.serving import bundled

__all__ = ["unpack", "unpacked_weights"]

log = logging.getLogger(__name__)


def unpacked_weights(gguf: Path, dtype: str) -> Path:
    """The folder holding ``gguf``'s weights in ``dtype`` (a torch dtype's name), unpacked on first use.

    The folder is named by the file's path, size and modification time, so a replaced file is unpacked
    again; an unpacking cut short leaves only a ``.partial`` folder, which the next call starts over. A lock
    file beside the folder makes a second process asking meanwhile wait for the first's folder.
    """
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    folder = bundled.cache_dir() / "attention" / f"{gguf.stem}-{dtype}-{key}"
    if folder.is_dir():
        return folder
    with FileLock(folder.with_name(folder.name + ".lock")):
        if not folder.is_dir():  # another process may have unpacked it while this one waited
            _unpack_in_child(gguf, folder, dtype)
    return folder


def _unpack_in_child(gguf: Path, folder: Path, dtype: str) -> None:
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    log.warning("unpacking %s into %s, once (it takes about a minute per billion parameters)", gguf.name, folder)
    child = f"import sys; from {__name__} import unpack; unpack(*sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", child, str(gguf), str(partial), dtype], check=False)
    if done.returncode != 0:
        raise RuntimeError(f"unpacking {gguf} into {partial} failed (exit code {done.returncode}); see the lines above")
    partial.rename(folder)
    log.info("unpacked %s in %.0f s", gguf.name, time.perf_counter() - started)


def unpack(gguf: str | Path, folder: str | Path, dtype: str) -> None:
    """Write the tensors of the file ``gguf`` in ``dtype``, its config and its tokenizer into the new ``folder``."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf, folder = Path(gguf), Path(folder)
    options = dict(gguf_file=gguf.name, local_files_only=True)
    config = AutoConfig.from_pretrained(str(gguf.parent), **options)
    with torch.device("meta"):  # the parameter names the tensors map to, with no memory behind them
        skeleton = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton,
                                   torch_dtype=getattr(torch, dtype))["tensors"]
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config.dtype = getattr(torch, dtype)
    config.save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(gguf.parent), **options).save_pretrained(folder)
