"""Fetching URLs that someone else chose (the model's ``web_fetch``, the media service's
``Ingest``, the scheduler's URL watchers) without reaching what they must not: the SSRF guard
(:mod:`.ssrf`) and the guarded, capped GET built on it (:mod:`.fetch`)."""
