"""Fixtures of the access tests: a local CA with a loopback certificate, and services started with TLS and tokens."""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from forethought.cluster.redis_server import RedisProcess
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import ServiceProcess

PORTS = itertools.count(56000)


@dataclass(frozen=True)
class Certificates:
    """A CA (``ca``) and a certificate it signed for 127.0.0.1 and localhost (``cert``, ``key``)."""

    ca: Path
    cert: Path
    key: Path

    @property
    def root_certs(self) -> bytes:
        return self.ca.read_bytes()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("forethought test CA")).issuer_name(_name("forethought test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    leaf = (x509.CertificateBuilder().subject_name(_name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    paths = Certificates(folder / "ca.pem", folder / "service.pem", folder / "service-key.pem")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return paths


def next_port() -> int:
    """The next free port of this folder's range (56000-56499)."""
    for port in PORTS:
        if port >= 56500:
            break
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port left in 56000-56499")


def serving(address: str, process: subprocess.Popen[bytes], credentials: grpc.ChannelCredentials | None,
            timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    with (grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                time.sleep(0.1)
    return False


class Launcher:
    """Starts ``forethought serve NAME`` on this folder's ports, in one Redis namespace; stops them all."""

    def __init__(self, redis_url: str, namespace: str, logs: Path) -> None:
        self._redis_url = redis_url
        self._namespace = namespace
        self._logs = logs
        self.started: list[ServiceProcess] = []

    def start(self, name: str, *args: str, credentials: grpc.ChannelCredentials | None = None,
              health: bool = True) -> ServiceProcess:
        """Starts the service and, with ``health``, waits until it serves; a port an outgoing connection took
        between the probe and the bind (the range lies among the ephemeral ports) is retried on the next."""
        for _ in range(3):
            service = self._launch(name, args)
            if not health or serving(service.address, service.process, credentials):
                return service
            if service.process.poll() is None or "Failed to bind" not in service.log():
                break
        raise AssertionError(f"{name} never reported SERVING; its log:\n{service.log()}")

    def _launch(self, name: str, args: tuple[str, ...]) -> ServiceProcess:
        port = next_port()
        log_path = self._logs / f"{name}-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "forethought.cli", "serve", name, "--port", str(port),
                 "--redis-url", self._redis_url, "--namespace", self._namespace, *args],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        service = ServiceProcess(name, f"127.0.0.1:{port}", process, log_path)
        self.started.append(service)
        return service

    def stop(self) -> None:
        """SIGTERM to every service, then waits for each: all are gone even when one outlives its grace
        (it is killed), which then fails the teardown by name."""
        for service in self.started:
            if service.process.poll() is None:
                service.process.send_signal(signal.SIGTERM)
        hung = []
        for service in self.started:
            try:
                service.terminate()
            except subprocess.TimeoutExpired:
                hung.append(service.name)
        assert not hung, f"{', '.join(hung)} did not stop within 30 s of SIGTERM (killed)"


@pytest.fixture(scope="module")
def launcher(redis_server: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    folder = tmp_path_factory.mktemp("access")
    started = Launcher(redis_server.url, f"access-{folder.name}", folder)
    yield started
    started.stop()
