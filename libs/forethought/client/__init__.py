"""The Python client of the mesh (docs/client.md): ``ForethoughtClient`` (blocking) and
``AsyncForethoughtClient`` (asyncio) over the scheduler's gRPC API, with typed requests and results,
deadlines, and retries that follow the server's hints."""

from forethought.client.client import AsyncForethoughtClient, ForethoughtClient
from forethought.client.requests import ChatMessage, ServiceLevelObjective, generate_request
from forethought.client.results import ApplicationRun, Chunk, ClientError, Completion, FinishedRun, RunProgress, Worker
from forethought.client.retry import RetryPolicy, retry_delay

__all__ = [
    "ApplicationRun",
    "AsyncForethoughtClient",
    "ChatMessage",
    "Chunk",
    "ClientError",
    "Completion",
    "FinishedRun",
    "ForethoughtClient",
    "RetryPolicy",
    "RunProgress",
    "ServiceLevelObjective",
    "Worker",
    "generate_request",
    "retry_delay",
]
