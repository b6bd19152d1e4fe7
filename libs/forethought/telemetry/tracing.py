"""OpenTelemetry tracing for every service: one tracer provider, the exporter chosen by configuration.

The server interceptor (``forethought.rpc.interceptors``) opens a span per call under the caller's
context; client channels carry the W3C trace context across hops (an interceptor, or ``trace_metadata``
on hot paths), so one trace shows a request through every service it touched.
"""

from __future__ import annotations

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)


def configure_tracing(service: str, exporter: str, endpoint: str = "") -> TracerProvider | None:
    """Installs the global tracer provider; ``exporter`` is none, console or otlp.

    With ``none`` a provider is still installed, so trace ids exist for logs and propagation.
    Returns the provider, or None when one was installed before (tests install their own).
    """
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": f"forethought-{service}"}))
    span_exporter = _exporter(exporter, endpoint)
    if span_exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    return provider


def _exporter(kind: str, endpoint: str) -> SpanExporter | None:
    if kind == "console":
        return ConsoleSpanExporter()
    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter,
        )

        return OTLPSpanExporter(endpoint=endpoint, insecure=True)
    return None


def current_trace_id() -> str:
    """The active span's trace id as 32 hex digits, or "" outside a span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """The active trace context as gRPC call metadata (W3C ``traceparent``); empty outside a span.

    Calls on a channel opened with ``traced=False`` pass it, so the trace crosses the hop without a
    client interceptor.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items())
