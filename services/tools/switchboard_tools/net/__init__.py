"""Network plumbing for the web tools: the SSRF guard, the guarded fetcher, readable-text
extraction, a small TTL cache and the web settings."""
