from __future__ import annotations

from forethought.predict import LengthCache
from forethought.predict.length_cache import (
    estimated_jaccard,
    minhash_signature,
    prompt_key,
)


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


PARAGRAPH = (
    "Please write a detailed product description for our new stainless steel water bottle that keeps drinks "
    "cold for twenty four hours and hot for twelve hours, mention the leak proof lid, the powder coated "
    "finish in five colours, the lifetime warranty, and end with a short call to action for the website"
)


def test_near_duplicate_prompt_gets_the_observed_length() -> None:
    cache = LengthCache()
    cache.put(PARAGRAPH, 180)
    edited = PARAGRAPH.replace("five colours", "six colours")
    assert estimated_jaccard(minhash_signature(PARAGRAPH), minhash_signature(edited)) >= 0.8
    assert cache.get(edited) == 180


def test_unrelated_prompt_and_exact_only_cache_miss() -> None:
    cache = LengthCache()
    cache.put(PARAGRAPH, 180)
    assert cache.get("Translate this sentence into French: the weather is lovely today") is None
    assert cache.get(" ".join(PARAGRAPH.split()[:20])) is None  # a large part missing is not a near-duplicate
    exact_only = LengthCache(near_threshold=None)
    exact_only.put(PARAGRAPH, 180)
    assert exact_only.get(PARAGRAPH.replace("five colours", "six colours")) is None
    assert exact_only.get(PARAGRAPH.upper()) == 180


def test_evicted_prompt_is_no_longer_a_near_duplicate_candidate() -> None:
    cache = LengthCache(capacity=1)
    cache.put(PARAGRAPH, 180)
    cache.put("Something entirely different about gardening and tomatoes in spring", 50)
    assert cache.get(PARAGRAPH.replace("five colours", "six colours")) is None
    assert len(cache) == 1
