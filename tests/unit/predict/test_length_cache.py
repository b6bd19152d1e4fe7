from __future__ import annotations

from forethought.predict import LengthCache
from forethought.predict.length_cache import prompt_key


def test_case_and_whitespace_variants_share_a_key() -> None:
    assert prompt_key("Write a  poem\n about  cats ") == prompt_key("write a poem about cats")
    assert prompt_key("write a poem about cats") != prompt_key("write a poem about dogs")


def test_hit_returns_the_last_observed_length() -> None:
    cache = LengthCache()
    cache.put("Hello there", 40)
    cache.put("hello  THERE", 42)
    assert cache.get("HELLO there") == 42
    assert cache.get("something else") is None


def test_least_recently_used_entry_is_evicted() -> None:
    cache = LengthCache(capacity=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
