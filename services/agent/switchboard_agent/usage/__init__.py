"""Token and cost usage: one row per model call, written in the background in
batches."""
