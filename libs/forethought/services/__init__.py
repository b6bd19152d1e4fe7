"""The service shells, one package each: protobuf in, the library's pure code, protobuf out.

Each ``<name>/shell.py`` holds the service's ``Settings``, its wiring (``build``) and ``SERVICE``, the
``ServiceSpec`` that ``forethought serve <name>`` and ``python -m forethought.services.<name>`` run.
"""

from __future__ import annotations

from forethought.rpc.server import ServiceSpec

SERVICE_NAMES = ("scheduler", "tokenizer", "predictor", "demand", "planner", "worker", "http")


def service_spec(name: str) -> ServiceSpec:
    """The spec of service ``name``, importing only that service; ValueError names the choices."""
    # One import per branch: a service's heavy dependencies (torch, vLLM) load only when it runs.
    if name == "scheduler":
        from forethought.services.scheduler.shell import SERVICE
    elif name == "tokenizer":
        from forethought.services.tokenizer.shell import SERVICE
    elif name == "predictor":
        from forethought.services.predictor.shell import SERVICE
    elif name == "demand":
        from forethought.services.demand.shell import SERVICE
    elif name == "planner":
        from forethought.services.planner.shell import SERVICE
    elif name == "worker":
        from forethought.services.worker.shell import SERVICE
    elif name == "http":
        from forethought.services.http.shell import SERVICE
    else:
        raise ValueError(f"unknown service {name!r}: choose one of {', '.join(SERVICE_NAMES)}")
    return SERVICE
