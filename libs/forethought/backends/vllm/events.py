"""vLLM prefix-cache events translated to Forethought's chained block hashes (Preble section 4.1).

vLLM publishes ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared`` for its own block hashes.
The global prefix index needs one hash for every engine, so each stored vLLM block is re-hashed from
its token ids with ``forethought.domain.block_hashes.block_hash``. vLLM's CPU attention needs blocks of a
multiple of 32 tokens, while the index uses 16: one vLLM block then becomes several index blocks,
which is exact because the chained hash of 32 tokens is the chain of its two 16-token halves.

``KvEventTranslator`` is pure (no sockets); ``KvEventSubscriber`` is the ZeroMQ shell around it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

import msgspec
import zmq
import zmq.asyncio
from forethought.domain import AllBlocksCleared, BlockRemoved, BlockStored, CacheEvent
from forethought.domain.block_hashes import ROOT_PARENT, block_hash

_log = logging.getLogger(__name__)
_OTHER_MEDIA = ("CPU", "STORAGE")  # offloaded copies: not blocks the engine can hit directly


class KvEventTranslator:
    """Maps vLLM block hashes to chains of index hashes and turns vLLM events into ours.

    NOTE: two vLLM blocks can share one index hash (same tokens, different LoRA); an index hash is
    removed only when the last vLLM block behind it goes, so the index never forgets a live block.
    """

    def __init__(self, index_block_size: int = 16) -> None:
        self.index_block_size = index_block_size
        self._chains: dict[Hashable, tuple[int, ...]] = {}
        self._owners: dict[int, int] = {}
        self.orphaned_blocks = 0
        """vLLM blocks whose parent was never seen (events lost): they cannot be chained."""

    def translate(self, events: Sequence[Any]) -> list[CacheEvent]:
        """Our events for one batch of vLLM events, in order; unknown kinds are skipped."""
        translated: list[CacheEvent] = []
        for event in events:
            if getattr(event, "medium", None) in _OTHER_MEDIA:
                continue
            kind = type(event).__name__
            if kind == "BlockStored":
                stored = self._stored(event)
                if stored is not None:
                    translated.append(stored)
            elif kind == "BlockRemoved":
                removed = self._removed(event.block_hashes)
                if removed.block_hashes:
                    translated.append(removed)
            elif kind == "AllBlocksCleared":
                self.forget()
                translated.append(AllBlocksCleared())
        return translated

    def forget(self) -> None:
        """Drops every block known: the engine cleared its cache, or a batch could not be read."""
        self._chains.clear()
        self._owners.clear()

    def index_hashes(self, vllm_hash: Hashable) -> tuple[int, ...]:
        """The index hashes standing for one live vLLM block; empty when unknown."""
        return self._chains.get(vllm_hash, ())

    def _stored(self, event: Any) -> BlockStored | None:
        size = self.index_block_size
        if event.block_size % size:
            raise ValueError(f"engine block size {event.block_size} is not a multiple of {size}")
        if event.parent_block_hash is None:
            parent = ROOT_PARENT
        elif event.parent_block_hash in self._chains:
            parent = self._chains[event.parent_block_hash][-1]
        else:
            self.orphaned_blocks += len(event.block_hashes)
            return None
        first_parent = parent
        tokens = list(event.token_ids)
        hashes: list[int] = []
        for position, vllm_hash in enumerate(event.block_hashes):
            start = position * event.block_size
            chain = []
            for offset in range(start, start + event.block_size, size):
                parent = block_hash(parent, tokens[offset : offset + size])
                chain.append(parent)
            self._remember(vllm_hash, tuple(chain))
            hashes.extend(chain)
        used = len(hashes) * size
        return BlockStored(tuple(hashes), first_parent, tuple(tokens[:used]), size)

    def _remember(self, vllm_hash: Hashable, chain: tuple[int, ...]) -> None:
        if vllm_hash in self._chains:
            return
        self._chains[vllm_hash] = chain
        for ours in chain:
            self._owners[ours] = self._owners.get(ours, 0) + 1

    def _removed(self, vllm_hashes: Sequence[Hashable]) -> BlockRemoved:
        gone: list[int] = []
        for vllm_hash in vllm_hashes:
            for ours in self._chains.pop(vllm_hash, ()):
                self._owners[ours] -= 1
                if self._owners[ours] == 0:
                    del self._owners[ours]
                    gone.append(ours)
        return BlockRemoved(tuple(gone))


class KvEventSubscriber:
    """Reads vLLM's ZeroMQ KV event stream and fans translated batches out to every listener."""

    def __init__(self, endpoint: str, topic: str, translator: KvEventTranslator) -> None:
        self.endpoint = endpoint
        self.topic = topic
        self.translator = translator
        self.missed_batches = 0
        self.unreadable_batches = 0
        self._listeners: set[asyncio.Queue[Sequence[CacheEvent] | None]] = set()
        self._context = zmq.asyncio.Context()
        self._socket = self._context.socket(zmq.SUB)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connects and starts relaying; returns once the subscription has had time to register."""
        self._socket.connect(self.endpoint)
        self._socket.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
        self._task = asyncio.create_task(self._relay(), name="vllm-kv-events")
        # ZeroMQ drops what a publisher sends before the subscription reaches it ("slow joiner").
        await asyncio.sleep(0.2)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for listener in self._listeners:
            listener.put_nowait(None)
        self._socket.close(linger=0)
        self._context.term()

    async def batches(self) -> AsyncIterator[Sequence[CacheEvent]]:
        """Translated batches from now on, until the subscriber stops."""
        queue: asyncio.Queue[Sequence[CacheEvent] | None] = asyncio.Queue()
        self._listeners.add(queue)
        try:
            while (batch := await queue.get()) is not None:
                yield batch
        finally:
            self._listeners.discard(queue)

    async def _relay(self) -> None:
        from vllm.distributed.kv_events import KVEventBatch

        decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        expected_seq: int | None = None
        while True:
            _topic, seq_bytes, payload = await self._socket.recv_multipart()
            seq = int.from_bytes(seq_bytes, "big")
            if expected_seq is not None and seq > expected_seq:
                self.missed_batches += seq - expected_seq
                _log.warning("lost %d KV event batches; the prefix index may lag", seq - expected_seq)
            expected_seq = seq + 1
            try:
                translated = self.translator.translate(decoder.decode(payload).events)
            except Exception as error:  # one bad batch must not end the relay, and with it the worker's index upkeep
                self.unreadable_batches += 1
                if str(self.unreadable_batches).strip("0") == "1":  # the 1st, 10th, 100th...: a steady fault stays quiet
                    _log.warning("%d KV event batch(es) could not be read (%s: %s): the index forgets this engine's "
                                 "blocks until it stores them again", self.unreadable_batches, type(error).__name__, error)
                self.translator.forget()
                translated = [AllBlocksCleared()]
            if translated:
                for listener in self._listeners:
                    listener.put_nowait(translated)
