"""``forethought serve``'s contract with a supervisor: a shell that reports it can no longer serve makes the
process drain and exit with status 1 (a signal's stop exits 0), so Kubernetes or compose starts it again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SERVE_A_SHELL_THAT_FAILS = textwrap.dedent('''
    import dataclasses, sys, time
    from forethought.rpc.server import PlainService, ServiceSpec, main
    from forethought.services.tokenizer.shell import SERVICE, build

    @dataclasses.dataclass
    class FailsAfterStarting(PlainService):
        started_at: float = 0.0

        async def start(self, address: str) -> None:
            self.started_at = time.monotonic()

        def failure(self) -> str | None:
            return "its engine died (injected)" if time.monotonic() - self.started_at > 0.5 else None

    def failing(settings):
        shell = build(settings)
        return FailsAfterStarting(shell.grpc_service_name, shell.add_to_server, shell.servicer)

    sys.exit(main(dataclasses.replace(SERVICE, build=failing), ["--port", "0", "--grace-s", "1"]))
''')


def test_a_shell_that_can_no_longer_serve_stops_the_process_with_status_1() -> None:
    finished = subprocess.run([sys.executable, "-c", SERVE_A_SHELL_THAT_FAILS], capture_output=True, text=True,
                              timeout=60)
    output = finished.stdout + finished.stderr
    assert finished.returncode == 1, output
    assert "FORETHOUGHT_READY tokenizer" in output  # it served first
    assert "tokenizer cannot serve any more: its engine died (injected)" in output
    assert "tokenizer stopped (its engine died (injected)): exit status 1" in output
