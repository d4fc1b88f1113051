"""Before `make run` starts anything: migrations, the admin user, static files and the
catalog with the demo."""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from dashboard.devstack.common import BASE_DIR, var_dir


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()


def ensure_admin(say: Callable[[str], None]) -> None:
    """The admin user: from ADMIN_USER / ADMIN_PASSWORD, else generated once and kept in
    var/admin_credentials (0600) so the same login works on every run."""
    from django.contrib.auth import get_user_model

    User = get_user_model()  # noqa: N806
    username = os.environ.get("ADMIN_USER", "")
    password = os.environ.get("ADMIN_PASSWORD", "")
    if username and password:
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        say(f"admin user {username!r} (password from ADMIN_PASSWORD)")
        return
    path = var_dir() / "admin_credentials"
    if path.exists():
        username, _, password = path.read_text().strip().partition(":")
    else:
        username, password = username or "admin", secrets.token_urlsafe(12)
    if not User.objects.filter(username=username).exists():
        User.objects.create_superuser(username, "", password)
        path.write_text(f"{username}:{password}\n")
        path.chmod(0o600)
    say(f"admin login: {username} / {password}   (kept in {path})")


def _static_fingerprint() -> str:
    import django

    digest = hashlib.sha256(django.__version__.encode())
    for path in sorted((BASE_DIR / "static").rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def prepare_database_and_files(say: Callable[[str], None]) -> None:
    """Migrate, the admin user, static files and the catalog with the demo."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    ensure_admin(say)
    # collectstatic compresses every file (seconds with plotly); only redo it on change.
    stamp = var_dir() / "static.stamp"
    fingerprint = _static_fingerprint()
    if (
        not (stamp.exists() and stamp.read_text() == fingerprint)
        or not Path(settings.STATIC_ROOT, "staticfiles.json").exists()
    ):
        call_command("collectstatic", interactive=False, verbosity=0)
        stamp.write_text(fingerprint)
    report = io.StringIO()
    call_command("load_catalog", demo=True, stdout=report)
    for line in report.getvalue().splitlines():
        say(line)
    connections.close_all()
    say(f"database, admin, static files and catalog ready in {time.monotonic() - started:.1f} s")
