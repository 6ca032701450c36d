"""What the local embedding model is, known without loading it: its name and vector size. Both
the loader (:mod:`.lazy_model`) and the model (:mod:`.local_model`) read it from here."""

from __future__ import annotations

from dataclasses import dataclass

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dimension: int


def describe(model: str = "") -> ModelSpec:
    """The local model's name and size; ``model`` must be empty or its name."""
    if model and model != MODEL_NAME:
        raise ValueError(f"SB_EMBEDDING_MODEL: the local provider has {MODEL_NAME} only")
    return ModelSpec(MODEL_NAME, DIMENSION)
