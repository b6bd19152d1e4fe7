"""The scheduler's tenant gate: quotas on ``Generate``, and request ids in each tenant's own namespace.

Wraps the ``SchedulerServicer`` when a tenants file is set (the interceptor in ``forethought.rpc.access`` has
already refused calls without a known token). ``Generate`` is admitted by the caller's quotas
(``forethought.access.QuotaLedger``; over one: RESOURCE_EXHAUSTED with ``RetryInfo``). Request ids are
scoped by tenant: the scheduler and the workers know a request as ``<tenant>/<id>``, the caller only as
``<id>``; so ``Cancel`` reaches only the caller's own requests (another tenant's id is simply unknown),
and two tenants may use the same id. The other RPCs pass through. Quota state is this replica's, in
memory (docs/access.md). The caller's tenant name is ``CALLER_TENANT`` while its ``Generate`` runs, for
the queue's fair share. With ``SharedRates`` the requests/s and tokens/min buckets are shared by every
replica in Redis, and this replica's ledger counts only open streams.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import grpc

from forethought.access import QuotaExceeded, QuotaLedger, Tenant, TenantBook
from forethought.rpc.access import bearer_token
from forethought.rpc.errors import ResourceExhausted, Unauthenticated
from forethought.services.scheduler.shared_rates import SharedRates
from forethought.v1 import scheduler_pb2

CALLER_TENANT: ContextVar[str] = ContextVar("caller_tenant", default="")
"""The tenant of the call being served ("" without tenants): one call is one task, so it stays the call's."""


def scoped_id(tenant: Tenant, request_id: str) -> str:
    """The scheduler's name of a tenant's request id (tenant names hold no '/')."""
    return f"{tenant.name}/{request_id}"


class TenantGate:
    """``SchedulerService`` with the caller's tenant and quotas applied; ``inner`` serves the calls."""

    def __init__(self, inner: Any, book: TenantBook, ledger: QuotaLedger, shared: SharedRates | None = None) -> None:
        self._inner = inner
        self._book = book
        self._ledger = ledger
        self._shared = shared
        self._charges: set[asyncio.Task[None]] = set()  # shared token charges under way

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # the RPCs without tenant rules

    async def Generate(self, request: scheduler_pb2.GenerateRequest,
                       context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        tenant = self._tenant(context)
        own_id = request.request_id or uuid.uuid4().hex
        request.request_id = scoped_id(tenant, own_id)
        local = await self._admit(tenant)
        CALLER_TENANT.set(tenant.name)
        used = 0
        try:
            # aclosing: a caller that leaves closes the servicer's stream here, in this call's task
            async with aclosing(self._inner.Generate(request, context)) as replies:
                async for reply in replies:
                    reply.request_id = own_id
                    if reply.HasField("usage"):
                        used = reply.usage.prompt_tokens + reply.usage.output_tokens
                    yield reply
        finally:
            self._ledger.finish(local, used)
            if self._shared is not None and used:
                # a task: the stream may be closing on a cancellation, where an await would not run
                charge = asyncio.create_task(self._shared.charge(tenant, used))
                self._charges.add(charge)
                charge.add_done_callback(self._charges.discard)

    async def _admit(self, tenant: Tenant) -> Tenant:
        """Counts a request against the tenant's limits; returns the tenant as this replica's ledger knows it
        (only its streams when the rates are shared)."""
        local = tenant
        if self._shared is not None:
            local = replace(tenant, quota=replace(tenant.quota, requests_per_s=0.0, tokens_per_min=0))
        try:
            self._ledger.admit(local)
            if self._shared is not None:
                try:
                    await self._shared.admit(tenant)
                except QuotaExceeded:
                    self._ledger.finish(local, 0)  # the stream it counted does not open
                    raise
        except QuotaExceeded as error:
            raise ResourceExhausted(str(error), error.retry_after_s) from error
        return local

    async def Cancel(self, request: scheduler_pb2.CancelRequest,
                     context: grpc.aio.ServicerContext) -> scheduler_pb2.CancelResponse:
        tenant = self._tenant(context)
        if request.request_id:  # an empty id goes on to be refused by the servicer's rule
            request.request_id = scoped_id(tenant, request.request_id)
        reply: scheduler_pb2.CancelResponse = await self._inner.Cancel(request, context)
        return reply

    def _tenant(self, context: grpc.aio.ServicerContext) -> Tenant:
        tenant = self._book.tenant_of(bearer_token(context.invocation_metadata()))
        if tenant is None:  # the interceptor refuses these first; a gate used without it must too
            raise Unauthenticated("missing or unknown bearer token")
        return tenant
