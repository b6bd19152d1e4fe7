"""Who may call the front door and how much: tenants found by token hash, and their quotas.

Pure logic on the first floor: ``tenants`` parses a tenants document (the scheduler reads the file) and finds
a caller's tenant from its bearer token, storing only SHA-256 hashes; ``quota`` admits or refuses a tenant's
request against its requests/s, tokens/min and concurrent-stream limits on an injected clock. The gRPC
interceptor and the scheduler's gate (``forethought.rpc.access``, ``forethought.services.scheduler.tenancy``)
do the I/O. Reference: docs/access.md.
"""

from forethought.access.quota import QuotaExceeded, QuotaLedger, TokenBucket
from forethought.access.tenants import Quota, Tenant, TenantBook, new_token, tenants_of, token_hash

__all__ = [
    "Quota",
    "QuotaExceeded",
    "QuotaLedger",
    "Tenant",
    "TenantBook",
    "TokenBucket",
    "new_token",
    "tenants_of",
    "token_hash",
]
