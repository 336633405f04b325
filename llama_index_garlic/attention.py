"""Attention weights from a Hugging Face causal LM, for GARLIC's edges (Appendix B.1) and search (§3.2.2).

Memory stays flat in the prompt's length (issue 41; the paper's Appendix B.1 accumulates layer by
layer for the same reason). The model runs with its own attention implementation, ``garlic_rows``:
each layer's output comes from PyTorch's fused attention (which never holds a ``tokens × tokens``
matrix), and the attention probabilities are computed only for the rows GARLIC reads — the reply's
tokens for an edge, the appended node's for a search step — :data:`ROW_BLOCK` rows at a time and averaged
over heads at once; a hook sums them over layers. The edges' pass keeps no keys and values (nothing follows
it). The decoder runs without its language-model head (GARLIC reads no logits). The weights load in bfloat16
(``dtype=``) and the products run in bfloat16 where the CPU multiplies it faster, else in float32
(:mod:`~llama_index_garlic.float32_compute`: bfloat16 products are several times slower without bfloat16
instructions, 3-4× faster with them); the attention scores are computed in float32 either way. Each layer's MLP
runs a block of positions at a time (:mod:`~llama_index_garlic.position_blocks`): the 1.5B's edges over a
10,520-token exchange (an 8K-token prompt, a 2K-token reply) then peak at 4.3 GB of RSS, its weights mapped from
the folder a GGUF is unpacked into once (5.0 GB with the MLPs over every position at once, 6.8 GB also with every
row at once and the cache kept, 9.6 GB with float32 weights unpacked at load, 17.6 GB with eager attention and full
logits). Float32 products match float32 weights' edges within 0.1 %, bfloat16 products float32 products' within
2.1 % at the 90th percentile (119 s against 247 s on an AVX-512 BF16 CPU); both keep every output's strongest input.

- :meth:`TransformersAttention.summary_edges`: teacher-forces the summarization prompt and the
  LLM's reply, and averages the attention from each output IP's tokens to each input node's tokens
  over heads, layers and tokens, attention inside a node left out (B.1).
- :meth:`TransformersAttention.session`: the search's first-turn prompt with a KV cache
  (Appendix C): each appended node costs a forward pass over its own tokens only, and yields the
  attention the node pays to the question.

Models load offline from a local directory, a ``.gguf`` file or the alias of a bundled GGUF
(:mod:`multihop_rag.serving.bundled`). A GGUF is unpacked once into a safetensors folder in the cache
(:mod:`~llama_index_garlic.gguf_weights`; needs ``gguf``, the ``transformers`` extra), which later
loads map from disk; load once per process and pass the object around.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from llama_index_garlic import prompts
from llama_index_garlic.gguf_weights import unpacked_weights
from multihop_rag.indexing.clustering import DecisionStore
from multihop_rag.serving import bundled
from multihop_rag.serving.freed_memory import return_freed_memory

if TYPE_CHECKING:  # torch and transformers come with the garlic extra, imported when a model is loaded
    import torch

__all__ = ["AttentionModel", "TransformersAttention", "AttentionSession", "ReplayedEdges", "load_attention_model"]

log = logging.getLogger(__name__)

_SENTINEL = "\u2063GARLIC-INFORMATION\u2063"
IMPLEMENTATION = "garlic_rows"
"""The attention implementation the model runs with (registered with transformers below)."""
_rows = threading.local()


def _attention_of_rows(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                       **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The layer's output from fused attention, and the head-averaged probabilities of the rows asked for
    (``_rows.slice`` of this pass's query positions; none asked: None). One sequence, no padding: the mask
    of those rows is causal over the cached and new keys."""
    import torch
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    output, _ = sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    rows = getattr(_rows, "slice", None)
    if rows is None:
        return output, None
    past = key.shape[2] - query.shape[2]
    positions = torch.arange(query.shape[2])[rows] + past
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    k = repeat_kv(key, query.shape[1] // key.shape[1])
    return output, head_mean_probabilities(query[:, :, rows, :], k, positions, scale)


ROW_BLOCK = 256
"""Query rows whose probabilities are computed at once: a block's scores are ``heads × ROW_BLOCK × keys``
floats (12 × 256 × 10,520 × 4 bytes = 129 MB for the 1.5B over a 10K-token exchange), where all of a 2,048-token
reply's rows at once were 1 GB, times three for the mask and the softmax (``bench_attention_memory.py``: 256 rows
peaked lowest and ran fastest of 64, 256 and all)."""


def head_mean_probabilities(query: torch.Tensor, key: torch.Tensor, positions: torch.Tensor,
                            scale: float) -> torch.Tensor:
    """Causal attention probabilities of ``query``'s rows (``1 × heads × rows × dim``, at key positions
    ``positions``) over ``key`` (``1 × heads × keys × dim``), averaged over heads: ``1 × rows × keys``, computed
    :data:`ROW_BLOCK` rows at a time."""
    import torch

    keys = torch.arange(key.shape[2])
    key_t = key.transpose(2, 3).float()  # scores in float32 whatever the products: a bfloat16 logit is off by ~0.1
    blocks = []
    for start in range(0, max(query.shape[2], 1), ROW_BLOCK):  # no rows: one empty block, ``1 × 0 × keys``
        scores = torch.matmul(query[:, :, start : start + ROW_BLOCK, :].float(), key_t).mul_(scale)
        scores.masked_fill_(keys[None, :] > positions[start : start + ROW_BLOCK, None], float("-inf"))
        blocks.append(torch.softmax(scores, dim=-1).mean(dim=1))
    return torch.cat(blocks, dim=1)


def _register_implementation() -> None:
    """Make ``garlic_rows`` known to transformers (repeating it is harmless)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, _attention_of_rows)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)


def _token_indices(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Tokens whose characters overlap ``[start, end)``."""
    return [i for i, (a, b) in enumerate(offsets) if a < end and b > start and b > a]


def _find_spans(text: str, needles: Sequence[str], start: int, end: int) -> list[tuple[int, int]] | None:
    """Character spans of ``needles``, found in order inside ``text[start:end]``; None if one is missing."""
    spans, cursor = [], start
    for needle in needles:
        at = text.find(needle, cursor, end)
        if at < 0 or not needle:
            return None
        spans.append((at, at + len(needle)))
        cursor = at + len(needle)
    return spans


@runtime_checkable
class AttentionModel(Protocol):
    """What GARLIC needs from an attention source (:class:`TransformersAttention` is the real one)."""

    name: str

    @property
    def forward_tokens(self) -> int:
        """Tokens the model has processed (a cost counter)."""

    def summary_edges(self, prompt: str, reply: str, inputs: Sequence[str], outputs: Sequence[str]) -> np.ndarray | None:
        """Unnormalised ``len(outputs) × len(inputs)`` attention from output IPs to input nodes."""

    def session(self, question: str, *, kv_cache: bool = True) -> Any:
        """An object whose ``append(texts)`` returns each appended node's attention to the question
        and whose ``seconds`` counts the time spent."""


class TransformersAttention:
    """A causal LM whose attention weights score GARLIC's edges and search steps."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "transformers"):
        _register_implementation()
        model.set_attn_implementation(IMPLEMENTATION)
        self.model = model.eval()
        self._decoder = model.get_decoder()
        self.tokenizer = tokenizer
        self.name = name
        self._layers = [m for n, m in model.named_modules() if n.endswith("self_attn")]
        if not self._layers:
            raise ValueError(f"found no '*.self_attn' attention modules in {type(model).__name__}")
        self._lock = threading.Lock()
        self.forward_tokens = 0
        """Tokens processed so far (a cost counter)."""

    # ---- loading ----

    @classmethod
    def from_pretrained(cls, source: str | Path, dtype: str = "bfloat16") -> TransformersAttention:
        """Load offline from a bundled alias, a ``.gguf`` file or a model directory, with weights stored in
        ``dtype`` and products computed in ``dtype`` or float32, whichever this CPU runs faster."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from llama_index_garlic.float32_compute import float32_products_where_faster
        from llama_index_garlic.position_blocks import mlps_in_blocks

        _register_implementation()

        source = str(source)
        if source == "default" or source in bundled.BUNDLED_LLMS:
            source = str(bundled.gguf_path(source))
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(
                f"no attention model at {path}: give a bundled alias ({', '.join(bundled.BUNDLED_LLMS)}), "
                "a .gguf file or a Hugging Face model directory"
            )
        name = path.name
        if path.suffix == ".gguf":
            name, path = path.stem, unpacked_weights(path, dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation=IMPLEMENTATION,
                                                     dtype=getattr(torch, dtype), local_files_only=True)
        float32_products_where_faster(model.get_decoder())
        mlps_in_blocks(model.get_decoder())
        return cls(model, tokenizer, name=name)

    # ---- attention capture ----

    @contextmanager
    def _capture(self, rows: slice) -> Iterator[dict[str, Any]]:
        """Collect the head-averaged attention of query positions ``rows``, summed over layers."""
        acc: dict[str, Any] = {"sum": None, "layers": 0}

        def hook(_module: Any, _args: Any, output: Any) -> None:
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                raise RuntimeError(f"the attention module returned no weights: it must run {IMPLEMENTATION!r}")
            acc["sum"] = weights[0] if acc["sum"] is None else acc["sum"] + weights[0]
            acc["layers"] += 1

        handles = [layer.register_forward_hook(hook) for layer in self._layers]
        _rows.slice = rows
        try:
            yield acc
        finally:
            _rows.slice = None
            for handle in handles:
                handle.remove()

    def _forward(self, input_ids: list[int], rows: slice, past: Any = None, *,
                 use_cache: bool = True) -> tuple[np.ndarray, Any]:
        """Attention of positions ``rows`` of this forward pass (heads and layers averaged), and the cache (None
        without ``use_cache``: a pass nothing follows keeps no keys and values)."""
        import torch

        with self._capture(rows) as acc, torch.no_grad():
            out = self._decoder(input_ids=torch.tensor([input_ids]), past_key_values=past, use_cache=use_cache)
        self.forward_tokens += len(input_ids)
        return (acc["sum"] / acc["layers"]).numpy(), out.past_key_values

    def _render(self, messages: list[dict[str, str]], **kwargs: Any) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
        return "\n\n".join(m["content"] for m in messages)

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    # ---- edges ----

    def summary_edges(self, prompt: str, reply: str, inputs: Sequence[str], outputs: Sequence[str]) -> np.ndarray | None:
        """``len(outputs) × len(inputs)`` attention from each output IP to each input node (Appendix B.1).

        ``prompt`` and ``reply`` are the summarization exchange; ``inputs`` and ``outputs`` must
        appear in them in order. Rows are not yet normalised. None if a text cannot be located.
        """
        rendered = self._render([{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}])
        user_at = rendered.find(prompt)
        if user_at < 0:
            return None
        prompt_end = user_at + len(prompt)
        in_spans = _find_spans(rendered, inputs, user_at, prompt_end)
        out_spans = _find_spans(rendered, outputs, prompt_end, len(rendered))
        if in_spans is None or out_spans is None:
            return None
        ids, offsets = self._encode(rendered)
        in_tokens = [_token_indices(offsets, a, b) for a, b in in_spans]
        out_tokens = [_token_indices(offsets, a, b) for a, b in out_spans]
        if not all(in_tokens) or not all(out_tokens):
            return None
        first = min(t[0] for t in out_tokens)
        with self._lock:
            attention, _ = self._forward(ids, slice(first, None), use_cache=False)
        edges = np.zeros((len(outputs), len(inputs)))
        for i, rows in enumerate(out_tokens):
            block = attention[np.asarray(rows) - first]
            for j, cols in enumerate(in_tokens):
                edges[i, j] = block[:, cols].mean()
        return_freed_memory()  # the pass's tensors, or a build's memory ratchets up pass after pass
        return edges

    # ---- search ----

    def session(self, question: str, *, kv_cache: bool = True) -> AttentionSession:
        """A first-turn prompt for ``question`` to which visited nodes are appended (Appendix C)."""
        return AttentionSession(self, question, kv_cache=kv_cache)

    def __repr__(self) -> str:
        return f"TransformersAttention({self.name}, {len(self._layers)} layers)"


class AttentionSession:
    """The search prompt of one question: ``[instruction, question, node, node, …]``.

    With ``kv_cache=True`` the keys and values of everything processed are kept, so appending a
    node runs the model over that node's tokens only; ``kv_cache=False`` re-reads the whole prompt
    at every step (for measuring what the cache saves).
    """

    def __init__(self, owner: TransformersAttention, question: str, *, kv_cache: bool = True):
        self.owner = owner
        self.kv_cache = kv_cache
        head = prompts.FIRST_TURN_HEAD.format(question=question)
        rendered = owner._render([{"role": "user", "content": head + _SENTINEL}])
        prefix = rendered[: rendered.index(_SENTINEL)]
        q_at = prefix.rfind(question)
        ids, offsets = owner._encode(prefix)
        self._question = _token_indices(offsets, q_at, q_at + len(question)) if q_at >= 0 and question else []
        if not self._question:
            raise ValueError("the question does not appear in the search prompt")
        self._ids = ids
        self._past = None
        self.seconds = 0.0
        if kv_cache:
            started = time.perf_counter()
            with owner._lock:
                _, self._past = owner._forward(ids, slice(0, 0))
            self.seconds += time.perf_counter() - started

    def append(self, texts: Sequence[str]) -> list[float]:
        """Append nodes (as ``* text`` lines); return the attention each pays to the question,
        averaged over heads, layers, the node's tokens and the question's tokens."""
        if not texts:
            return []
        pieces = [self.owner._encode(prompts.bullet(t))[0] for t in texts]
        new = [tok for piece in pieces for tok in piece]
        started = time.perf_counter()
        with self.owner._lock:
            if self.kv_cache:
                attention, self._past = self.owner._forward(new, slice(None), self._past)
            else:
                attention, _ = self.owner._forward(self._ids + new, slice(len(self._ids), None), use_cache=False)
        self.seconds += time.perf_counter() - started
        self._ids = self._ids + new
        scores, row = [], 0
        for piece in pieces:
            scores.append(float(attention[row : row + len(piece)][:, self._question].mean()))
            row += len(piece)
        return scores

    @property
    def tokens(self) -> int:
        """Tokens in the prompt so far."""
        return len(self._ids)


class ReplayedEdges:
    """An attention model whose summary edges are kept in a key -> JSON store (the index's LLM-call cache),
    keyed by the model's name and the exchange's texts: a build resumed on any machine replays them as it
    replays its LLM calls, where the attention passes were most of a build's time (1,533 of 2,191 s for
    GARLIC at n_s = 8K over 199 HotpotQA passages). Searches are not kept (each is a question's own)."""

    def __init__(self, model: AttentionModel, store: DecisionStore):
        self.model, self.store = model, store
        self.name = model.name

    @property
    def forward_tokens(self) -> int:
        return self.model.forward_tokens

    def summary_edges(self, prompt: str, reply: str, inputs: Sequence[str], outputs: Sequence[str]) -> np.ndarray | None:
        blob = json.dumps({"model": self.name, "prompt": prompt, "reply": reply, "inputs": list(inputs),
                           "outputs": list(outputs)}, sort_keys=True)
        key = "edges:" + hashlib.sha256(blob.encode()).hexdigest()
        if (kept := self.store.get(key)) is not None:
            rows = json.loads(kept)
            return None if rows is None else np.asarray(rows, dtype=float)
        edges = self.model.summary_edges(prompt, reply, inputs, outputs)
        self.store.put(key, json.dumps(None if edges is None else edges.tolist()))
        return edges

    def session(self, question: str, *, kv_cache: bool = True) -> Any:
        return self.model.session(question, kv_cache=kv_cache)


def load_attention_model(spec: AttentionModel | str | Path | None) -> AttentionModel | None:
    """None, a loaded attention model, or where to load a :class:`TransformersAttention` from."""
    if spec is None or isinstance(spec, AttentionModel):
        return spec
    if isinstance(spec, (str, Path)):
        return TransformersAttention.from_pretrained(spec)
    raise TypeError(f"attention_model must be a path, a bundled alias or an AttentionModel, not {type(spec).__name__}")
