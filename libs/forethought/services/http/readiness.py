"""Whether the HTTP front door is ready: the probe of ``/ready`` that ``forethought up`` and ``status`` use.

Its answers are the names of gRPC health's states, so a table of services reads the same for every one.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request


def _probe(address: str, timeout_s: float) -> str:
    try:
        with urllib.request.urlopen(f"http://{address}/ready", timeout=timeout_s) as reply:
            return "SERVING" if reply.status == 200 else "NOT_SERVING"
    except urllib.error.HTTPError:
        return "NOT_SERVING"  # it answers, but the scheduler behind it does not
    except (urllib.error.URLError, OSError):
        return "UNREACHABLE"


async def check_ready(address: str, timeout_s: float = 1.0) -> str:
    """SERVING when ``GET /ready`` answers 200, NOT_SERVING on another status, UNREACHABLE when nothing answers."""
    return await asyncio.to_thread(_probe, address, timeout_s)


async def wait_until_ready(address: str, timeout_s: float) -> None:
    """Polls ``/ready`` until it answers 200; raises TimeoutError naming the address otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check_ready(address) == "SERVING":
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"http://{address}/ready did not answer 200 within {timeout_s:.0f} s")
