"""The shared LRU cache: eviction order, counters, the disabled size."""

from cypherturn.lru import LRUCache


def test_least_recently_used_goes_first_and_counters_count():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.stats() == {"size": 2, "maxsize": 2, "hits": 3, "misses": 1}
    cache.clear()
    assert len(cache) == 0 and cache.stats()["hits"] == 0


def test_size_zero_disables_and_none_is_never_stored():
    off = LRUCache(0)
    off.put("a", 1)
    assert off.get("a") is None and len(off) == 0
    on = LRUCache(4)
    on.put("a", None)
    assert len(on) == 0
