"""Sessions, runs and transcripts in PostgreSQL, and what belongs to a session:
its compactions, its model, what admin operations do to it, a run's standing in it."""
