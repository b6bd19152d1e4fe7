"""KvEventTranslator on vLLM's own event classes: 32-token vLLM blocks become 16-token chained hashes."""

from __future__ import annotations

from forethought.backends.vllm.events import KvEventTranslator
from forethought.domain import AllBlocksCleared, BlockRemoved, BlockStored
from forethought.domain.block_hashes import chained_block_hashes
from vllm.distributed.kv_events import AllBlocksCleared as VllmCleared
from vllm.distributed.kv_events import BlockRemoved as VllmRemoved
from vllm.distributed.kv_events import BlockStored as VllmStored

TOKENS = list(range(1000, 1096))  # three 32-token vLLM blocks


def _stored(
    hashes: list[int], parent: int | None, tokens: list[int], medium: str | None = "GPU"
) -> VllmStored:
    return VllmStored(
        block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=32,
        lora_id=None, medium=medium, lora_name=None,
    )


def test_stored_blocks_are_rehashed_as_a_chain_continuing_from_the_parent() -> None:
    translator = KvEventTranslator(16)
    expected = chained_block_hashes(TOKENS, 16)

    first = translator.translate([_stored([11, 12], None, TOKENS[:64])])
    second = translator.translate([_stored([13], 12, TOKENS[64:])])

    assert first == [BlockStored(tuple(expected[:4]), 0, tuple(TOKENS[:64]), 16)]
    assert second == [BlockStored(tuple(expected[4:]), expected[3], tuple(TOKENS[64:]), 16)]
    assert translator.index_hashes(12) == tuple(expected[2:4])


def test_removal_translates_through_the_map_and_keeps_hashes_still_held() -> None:
    translator = KvEventTranslator(16)
    expected = chained_block_hashes(TOKENS[:32], 16)
    translator.translate([_stored([11], None, TOKENS[:32]), _stored([21], None, TOKENS[:32])])

    assert translator.translate([VllmRemoved(block_hashes=[11], medium="GPU")]) == []
    assert translator.translate([VllmRemoved(block_hashes=[21, 99], medium="GPU")]) == [
        BlockRemoved(tuple(expected))
    ]


def test_orphans_offloaded_copies_and_clears() -> None:
    translator = KvEventTranslator(16)

    assert translator.translate([_stored([31], 777, TOKENS[:32])]) == []
    assert translator.orphaned_blocks == 1
    assert translator.translate([_stored([41], None, TOKENS[:32], medium="CPU")]) == []
    translator.translate([_stored([51], None, TOKENS[:32])])
    assert translator.translate([VllmCleared()]) == [AllBlocksCleared()]
    assert translator.index_hashes(51) == ()


async def test_the_subscriber_relays_on_past_a_batch_it_cannot_read_and_the_index_forgets_the_engines_blocks() -> None:
    import asyncio

    import msgspec
    import zmq
    import zmq.asyncio
    from forethought.backends.vllm.events import KvEventSubscriber
    from forethought.cluster.ports import free_port
    from vllm.distributed.kv_events import KVEventBatch

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    context = zmq.asyncio.Context()
    publisher = context.socket(zmq.PUB)
    publisher.bind(endpoint)
    subscriber = KvEventSubscriber(endpoint, "kv", KvEventTranslator(16))
    try:
        await subscriber.start()
        batches = subscriber.batches()
        received = asyncio.ensure_future(anext(batches))
        await asyncio.sleep(0.05)  # the listener is registered
        stored = KVEventBatch(ts=0.0, events=[_stored([11], None, TOKENS[:32])])
        for seq, payload in enumerate([msgspec.msgpack.encode(stored), b"\x93not a batch",
                                       msgspec.msgpack.encode(KVEventBatch(ts=1.0, events=[_stored([21], None, TOKENS[32:64])]))]):
            await publisher.send_multipart([b"kv", seq.to_bytes(8, "big"), payload])
        first = await asyncio.wait_for(received, 10)
        second = await asyncio.wait_for(anext(batches), 10)
        third = await asyncio.wait_for(anext(batches), 10)
        assert [type(event) for event in first] == [BlockStored]
        assert second == [AllBlocksCleared()] and subscriber.unreadable_batches == 1
        assert [type(event) for event in third] == [BlockStored]  # and the relay goes on
        assert subscriber.translator.index_hashes(11) == ()  # forgotten with the bad batch
        await batches.aclose()
    finally:
        await subscriber.stop()
        publisher.close(linger=0)
        context.term()
