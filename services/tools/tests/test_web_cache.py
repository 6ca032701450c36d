"""web_fetch's result cache: expiry and its bound."""

from __future__ import annotations

from switchboard_tools.net.cache import TTLCache


def test_ttl_cache_expiry_and_bound() -> None:
    now = [0.0]
    cache: TTLCache[str] = TTLCache(max_entries=2, ttl_s=10, clock=lambda: now[0])
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.get("a") == "1"  # a is now the most recent
    cache.put("c", "3")
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("1", None, "3")
    now[0] = 10.0
    assert cache.get("a") is None and len(cache) == 1
    disabled: TTLCache[str] = TTLCache(max_entries=5, ttl_s=0)
    disabled.put("a", "1")
    assert disabled.get("a") is None
