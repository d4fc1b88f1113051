import os
import subprocess
import sys
from pathlib import Path

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
