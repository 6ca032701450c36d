"""Compaction: summarising a session's older turns when its context fills, with a
memory flush first; what the model sees of a transcript, measured and trimmed."""
