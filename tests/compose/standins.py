"""Stand-ins for the official base images, built from Debian's packages.

Where no image registry is reachable (this project's machines reach PyPI, Debian and npm
only), `make compose-check` cannot pull python:3.11-slim, postgres:16 and redis:7. It
builds a root file system for each with mmdebstrap from Debian 12's packages and imports it
into the engine under the official name, labelled `inferwatch.standin`. Each keeps the
part of its official image's contract that docker-compose.yml relies on:

- python:3.11-slim: `python` and `pip` on PATH (Debian's Python 3.11; pip may install
  into the system, as in the official image), trusting the host's certificate
  authorities (a package proxy's, where PyPI is reached through one).
- postgres:16: the entrypoint's first-start contract (POSTGRES_USER,
  POSTGRES_PASSWORD_FILE, scripts in /docker-entrypoint-initdb.d, data in
  /var/lib/postgresql/data, the server run as the `postgres` user) and pg_isready. Debian 12
  ships PostgreSQL 15, so this stand-in serves 15 under the 16 tag.
- redis:7: redis-server and redis-cli 7.0 from Debian, a `redis` user owning /data.

Built once per engine data root and reused by tag (a build takes a few minutes).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEL = "inferwatch.standin"
SUITE = "bookworm"  # Debian 12: Python 3.11 and Redis 7.0, as the tags promise

PG_BIN = "/usr/lib/postgresql/15/bin"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# tag: (Debian packages, customize hooks run with the new root as $1, docker import changes)
STANDINS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "python:3.11-slim": (
        ["python3", "python3-pip", "python3-venv", "ca-certificates"],
        [
            'ln -s /usr/bin/python3 "$1/usr/local/bin/python"',
            'ln -s /usr/bin/pip3 "$1/usr/local/bin/pip"',
            # The official image's Python is not Debian's: pip installs into it freely.
            'rm -f "$1"/usr/lib/python3.11/EXTERNALLY-MANAGED',
            # This machine's certificate authorities (its package proxy's among them): the
            # image's build installs from PyPI through them.
            'cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"',
        ],
        [f"ENV PATH={PATH}", "ENV LANG=C.UTF-8", 'CMD ["python3"]'],
    ),
    "postgres:16": (
        ["postgresql-15", "gosu"],
        [
            'mkdir -p "$1/docker-entrypoint-initdb.d" "$1/var/lib/postgresql/data"',
            'chroot "$1" chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql',
            f'cp "{HERE}/standin-postgres-entrypoint.sh" "$1/usr/local/bin/docker-entrypoint.sh"',
            'chmod 755 "$1/usr/local/bin/docker-entrypoint.sh"',
        ],
        [
            f"ENV PATH={PG_BIN}:{PATH}",
            "ENV PGDATA=/var/lib/postgresql/data",
            "ENV LANG=C.UTF-8",
            'ENTRYPOINT ["docker-entrypoint.sh"]',
            'CMD ["postgres"]',
        ],
    ),
    "redis:7": (
        ["redis-server", "redis-tools"],
        ['mkdir -p "$1/data"', 'chroot "$1" chown redis:redis /data'],
        ["ENV LANG=C.UTF-8", "WORKDIR /data", 'CMD ["redis-server"]'],
    ),
}


def has_image(docker: list[str], tag: str) -> bool:
    return subprocess.run([*docker, "image", "inspect", tag], capture_output=True).returncode == 0


def is_standin(docker: list[str], tag: str) -> bool:
    out = subprocess.run(
        [*docker, "image", "inspect", "-f", f'{{{{index .Config.Labels "{LABEL}"}}}}', tag],
        capture_output=True,
        text=True,
    )
    return out.returncode == 0 and out.stdout.strip() == "1"


def build(docker: list[str], tag: str, log=print) -> None:
    """Build one stand-in with mmdebstrap and import it under `tag`."""
    packages, hooks, changes = STANDINS[tag]
    with tempfile.TemporaryDirectory(prefix="iw-standin-") as tmp:
        tarball = Path(tmp) / "root.tar"
        command = ["mmdebstrap", "--variant=minbase", "--quiet"]
        command += [f"--include={','.join(packages)}"]
        command += [f"--customize-hook={hook}" for hook in hooks]
        # Smaller images: no documentation, manual pages or translations.
        command += [
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
        ]
        command += ["--dpkgopt=path-exclude=/usr/share/locale/*", SUITE, str(tarball)]
        log(f"building stand-in {tag} from Debian {SUITE}: {', '.join(packages)}")
        subprocess.run(command, check=True)
        imported = [*docker, "import"]
        for change in [*changes, f"LABEL {LABEL}=1"]:
            imported += ["--change", change]
        subprocess.run([*imported, str(tarball), tag], check=True, stdout=subprocess.DEVNULL)


def ensure(docker: list[str], log=print) -> list[str]:
    """Every base image the compose file names, built as a stand-in when missing.
    Returns the tags that are stand-ins (built now or before)."""
    standins = []
    for tag in STANDINS:
        if not has_image(docker, tag):
            build(docker, tag, log)
        if is_standin(docker, tag):
            standins.append(tag)
    return standins
