import os
import subprocess
import sys
from pathlib import Path

import httpcore
import pytest

ROOT = Path(__file__).resolve().parents[1]


def clean_env(**overrides: str) -> dict[str, str]:
    """The environment of a fresh shell: none of this test run's Inferwatch settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"}
    }
    env.update(overrides)
    return env


def run_python(args: list[str], env: dict[str, str], timeout: float = 60):
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def loopback_only(monkeypatch) -> list[str]:
    """Every address the engine really connects to (probes and alert transports share its
    async backend); anything but loopback is refused here, before a socket exists,
    whatever the egress policy under test decided."""
    opened: list[str] = []
    real = httpcore.AnyIOBackend.connect_tcp

    async def guarded(self, host, port, *args, **kwargs):
        opened.append(host)
        if host not in ("127.0.0.1", "::1"):
            raise AssertionError(f"the test tried to connect to {host}")
        return await real(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", guarded)
    return opened
