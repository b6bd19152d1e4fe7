"""The scheduler's tenant gate: quotas on ``Generate`` and requests kept to their tenant.

Wraps the ``SchedulerServicer`` when a tenants file is set (the interceptor in ``forethought.rpc.access`` has
already refused calls without a known token). ``Generate`` is admitted by the caller's quotas
(``forethought.access.QuotaLedger``; over one: RESOURCE_EXHAUSTED with ``RetryInfo``) and its request id is
recorded as its tenant's while it runs; ``Cancel`` of a request another tenant owns answers as for an
unknown one. The other RPCs pass through. Quota state is this replica's, in memory (docs/access.md).
The caller's tenant name is ``CALLER_TENANT`` while its ``Generate`` runs, for the queue's fair share.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import grpc

from forethought.access import QuotaExceeded, QuotaLedger, Tenant, TenantBook
from forethought.rpc.access import bearer_token
from forethought.rpc.errors import AlreadyExists, ResourceExhausted, Unauthenticated
from forethought.v1 import scheduler_pb2

CALLER_TENANT: ContextVar[str] = ContextVar("caller_tenant", default="")
"""The tenant of the call being served ("" without tenants): one call is one task, so it stays the call's."""


class TenantGate:
    """``SchedulerService`` with the caller's tenant and quotas applied; ``inner`` serves the calls."""

    def __init__(self, inner: Any, book: TenantBook, ledger: QuotaLedger) -> None:
        self._inner = inner
        self._book = book
        self._ledger = ledger
        self._owners: dict[str, str] = {}  # request id -> its tenant's name, while its Generate runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # the RPCs without tenant rules

    async def Generate(self, request: scheduler_pb2.GenerateRequest,
                       context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.GenerateResponse]:
        tenant = self._tenant(context)
        request.request_id = request.request_id or uuid.uuid4().hex  # NOTE: the id must be known here to own it
        if request.request_id in self._owners:
            raise AlreadyExists(f"request_id: {request.request_id!r} is already running")
        try:
            self._ledger.admit(tenant)
        except QuotaExceeded as error:
            raise ResourceExhausted(str(error), error.retry_after_s) from error
        self._owners[request.request_id] = tenant.name
        CALLER_TENANT.set(tenant.name)
        used = 0
        try:
            async for reply in self._inner.Generate(request, context):
                if reply.HasField("usage"):
                    used = reply.usage.prompt_tokens + reply.usage.output_tokens
                yield reply
        finally:
            del self._owners[request.request_id]
            self._ledger.finish(tenant, used)

    async def Cancel(self, request: scheduler_pb2.CancelRequest,
                     context: grpc.aio.ServicerContext) -> scheduler_pb2.CancelResponse:
        tenant = self._tenant(context)
        if self._owners.get(request.request_id, tenant.name) != tenant.name:
            return scheduler_pb2.CancelResponse(cancelled=False)  # as for an unknown id: nothing to see
        reply: scheduler_pb2.CancelResponse = await self._inner.Cancel(request, context)
        return reply

    def _tenant(self, context: grpc.aio.ServicerContext) -> Tenant:
        tenant = self._book.tenant_of(bearer_token(context.invocation_metadata()))
        if tenant is None:  # the interceptor refuses these first; a gate used without it must too
            raise Unauthenticated("missing or unknown bearer token")
        return tenant
