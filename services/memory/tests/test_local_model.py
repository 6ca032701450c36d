"""The local model's forward pass on memory-mapped weights: the same vectors as before (the
previous implementation is kept here: weights read into memory and every encoder matrix
transposed into a copy), no tensor copied, and the file mapped rather than read."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from switchboard_memory.local_model import (
    BATCH,
    BATCH_TOKENS,
    F32,
    LocalEmbedder,
    MiniLM,
    batches,
    model_dir,
    read_safetensors,
)

SENTENCES = [
    "A man is eating food.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Violin",
    "",
    "word " * 400,  # truncated at 256 tokens
    "Ünïcödé ✓ 東京",
]
# The first components of "A man is eating food." as the previous implementation gave them.
REFERENCE = [0.0332, 0.0044, -0.0063, 0.0484, -0.1387, -0.0336]


class CopiedMiniLM(MiniLM):
    """The previous implementation: the file's bytes in memory, each (out, in) encoder matrix
    transposed once into a contiguous copy, a dense layer ``x @ W``."""

    def __init__(self, weights: dict[str, F32]) -> None:
        copied = {k: np.array(v) for k, v in weights.items()}
        for key, value in copied.items():
            if key.endswith(".weight") and value.ndim == 2 and not key.startswith("embeddings."):
                copied[key] = np.ascontiguousarray(value.T)
        super().__init__(copied)

    def _dense(self, x: F32, name: str) -> F32:
        return x @ self.w[f"{name}.weight"] + self.w[f"{name}.bias"]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.load()


def test_vectors_are_the_previous_ones(embedder: LocalEmbedder) -> None:
    old = LocalEmbedder(embedder.tokenizer, CopiedMiniLM(embedder.network.w))
    new_vectors = np.array(embedder.embed_sync(SENTENCES), dtype=np.float32)
    old_vectors = np.array(old.embed_sync(SENTENCES), dtype=np.float32)
    assert new_vectors.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(new_vectors, old_vectors, rtol=0, atol=1e-6)
    np.testing.assert_allclose(new_vectors[0][: len(REFERENCE)], REFERENCE, atol=1e-4)
    assert np.allclose(np.linalg.norm(new_vectors, axis=1), 1.0, atol=1e-5)


def test_weights_are_the_mapped_file_and_never_copied(embedder: LocalEmbedder) -> None:
    weights = read_safetensors(model_dir() / "model.safetensors")
    for name, tensor in weights.items():
        assert not tensor.flags.writeable, name  # a read-only view of the mapping, not a copy
        base = tensor.base
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap), name
    model = MiniLM(weights)
    assert all(model.w[k] is weights[k] for k in weights)  # no transposed copies
    for name, tensor in embedder.network.w.items():
        assert not tensor.flags.writeable, name


def test_a_batch_gives_each_sentence_its_own_vector(embedder: LocalEmbedder) -> None:
    """Batched (padded, sorted by length) or alone: the same vector."""
    together = np.array(embedder.embed_sync(SENTENCES[:3]))
    alone = np.array([embedder.embed_sync([s])[0] for s in SENTENCES[:3]])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_forward_passes_are_cut_by_texts_and_tokens() -> None:
    """Sorted short to long: short texts share a pass (up to BATCH), long ones go in small
    groups, so that no pass pads more than BATCH_TOKENS tokens."""
    lengths = [5] * 40 + [100] * 12 + [256] * 5
    encoded = [[1] * n for n in lengths]
    cut = batches(list(range(len(lengths))), encoded)
    assert [i for chosen in cut for i in chosen] == list(range(len(lengths)))
    for chosen in cut:
        assert len(chosen) <= BATCH
        assert len(chosen) == 1 or len(chosen) * max(lengths[i] for i in chosen) <= BATCH_TOKENS
    assert len(cut[0]) == BATCH  # 32 short texts in one pass
    assert [len(chosen) for chosen in cut] == [32, 10, 10, 4, 1]  # with BATCH_TOKENS 1024
