"""The memory service: embeddings and hybrid search over what an agent remembers."""
