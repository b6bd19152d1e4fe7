"""Service configuration: flags and environment variables from one dataclass per service.

Every field of a settings dataclass becomes a flag ``--field-name`` and an environment variable
``FORETHOUGHT_FIELD_NAME``; a flag beats the environment, which beats the default. Values are
validated at start, and a bad value stops the process with a message naming the setting and the rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

from redis.asyncio.connection import parse_url

ENV_PREFIX = "FORETHOUGHT_"
EXPORTERS = ("none", "console", "otlp")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""Python's level names, in any case."""


class MissingPrerequisite(RuntimeError):
    """Something a service or command needs is not installed or not built; the message names it and the
    command that provides it, so the CLI can say so in one line instead of a traceback."""


class ConfigError(ValueError):
    """A setting has a value its rule forbids."""

    def __init__(self, name: str, rule: str, value: object) -> None:
        flag = "--" + name.replace("_", "-")
        env = ENV_PREFIX + name.upper()
        super().__init__(f"invalid setting {flag} / {env} = {value!r}: {rule}")


def one_of(choices: Sequence[str]) -> str:
    """The rule a setting outside ``choices`` breaks, naming them as a person would type them."""
    return f"must be one of {', '.join(choices)}"


def option(default: Any, help: str) -> Any:
    """A settings field with its help text."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ServiceSettings:
    """Settings every service shares."""

    host: str = option("127.0.0.1", "address to listen on")
    port: int = option(0, "gRPC port; 0 picks a free one")
    metrics_port: int = option(-1, "Prometheus metrics port; 0 picks a free one, -1 disables")
    redis_url: str = option("redis://127.0.0.1:6379/0", "Redis holding the shared state; each command and connect "
                            "is bounded by 5 s (?socket_timeout=S&socket_connect_timeout=S changes it)")
    namespace: str = option("forethought", "prefix of every Redis key")
    otel_exporter: str = option("none", f"trace exporter: one of {', '.join(EXPORTERS)}")
    otel_endpoint: str = option("", "OTLP collector address (host:port) when the exporter is otlp")
    log_format: str = option("text", f"log format: one of {', '.join(LOG_FORMATS)}")
    log_level: str = option("INFO", f"logging level: one of {', '.join(LOG_LEVELS)} (any case)")
    grace_s: float = option(10.0, "seconds in-flight calls may take to finish on shutdown")
    tls_cert: str = option("", "PEM certificate chain this service serves TLS with (with --tls-key); empty = plaintext")
    tls_key: str = option("", "PEM private key of --tls-cert")
    tls_ca: str = option("", "PEM root certificates its own gRPC calls to other services trust (TLS); empty = plaintext calls")
    tls_client_ca: str = option("", "PEM root certificates a caller's certificate must chain to (mutual TLS, with --tls-cert); "
                                    "empty = callers need no certificate")

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raises ConfigError for the first setting that breaks its rule."""
        if not 0 <= self.port <= 65535:
            raise ConfigError("port", "must be in 0..65535", self.port)
        if not -1 <= self.metrics_port <= 65535:
            raise ConfigError("metrics_port", "must be -1 (off) or in 0..65535", self.metrics_port)
        if self.otel_exporter not in EXPORTERS:
            raise ConfigError("otel_exporter", one_of(EXPORTERS), self.otel_exporter)
        if self.otel_exporter == "otlp" and not self.otel_endpoint:
            raise ConfigError("otel_endpoint", "is required when otel_exporter is otlp", "")
        if self.log_format not in LOG_FORMATS:
            raise ConfigError("log_format", one_of(LOG_FORMATS), self.log_format)
        if self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError("log_level", one_of(LOG_LEVELS), self.log_level)
        if self.grace_s < 0:
            raise ConfigError("grace_s", "must be >= 0", self.grace_s)
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_key" if self.tls_cert else "tls_cert", "--tls-cert and --tls-key go together", "")
        if self.tls_client_ca and not self.tls_cert:
            raise ConfigError("tls_client_ca", "needs --tls-cert and --tls-key (mutual TLS is TLS first)", self.tls_client_ca)
        for name in ("tls_cert", "tls_key", "tls_ca", "tls_client_ca"):
            if getattr(self, name) and not os.path.isfile(getattr(self, name)):
                raise ConfigError(name, "must be a PEM file that exists", getattr(self, name))
        if not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError("redis_url", "must start with redis://, rediss:// or unix://", self.redis_url)
        try:
            parse_url(self.redis_url)
        except ValueError as error:  # a query option redis-py cannot read, such as socket_timeout=abc
            raise ConfigError("redis_url", f"must be a URL redis-py reads: {error}", self.redis_url) from None


S = TypeVar("S", bound=ServiceSettings)


def add_arguments(parser: argparse.ArgumentParser, settings_type: type[ServiceSettings]) -> None:
    """Adds one flag per settings field; the default shown is the environment's value if set."""
    hints = get_type_hints(settings_type)
    for spec in dataclasses.fields(settings_type):
        flag = "--" + spec.name.replace("_", "-")
        env = ENV_PREFIX + spec.name.upper()
        kind = hints[spec.name]
        help_text = f"{spec.metadata.get('help', '')} [env {env}, default {spec.default!r}]"
        if kind is bool:
            parser.add_argument(flag, dest=spec.name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            parser.add_argument(flag, dest=spec.name, type=str, default=None, help=help_text)


def settings_from(
    settings_type: type[S], args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> S:
    """Builds validated settings: flag, else environment variable, else default."""
    environ = os.environ if environ is None else environ
    hints = get_type_hints(settings_type)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(settings_type):
        raw = getattr(args, spec.name, None)
        if raw is None:
            raw = environ.get(ENV_PREFIX + spec.name.upper())
        if raw is not None:
            values[spec.name] = _convert(spec.name, hints[spec.name], raw)
    return settings_type(**values)


def _convert(name: str, kind: Any, raw: object) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("1", "true", "yes", "on"):
            return True
        if str(raw).lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(name, "must be true or false", raw)
    if kind in (int, float):
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigError(name, f"must be {'an integer' if kind is int else 'a number'}", raw) from None
        if value != value:  # NaN passes every range check (each comparison is False): no setting means it
            raise ConfigError(name, "must be a number", raw)
        return value
    if kind == tuple[str, ...]:
        return tuple(part.strip() for part in str(raw).split(",") if part.strip())
    return str(raw)


def describe(settings: ServiceSettings) -> Sequence[str]:
    """``name=value`` lines for the start-up log."""
    return [f"{spec.name}={getattr(settings, spec.name)!r}" for spec in dataclasses.fields(settings)]
