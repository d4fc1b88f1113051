"""A container engine for `make compose-check`: the one running, or Debian's dockerd started
by hand (no systemd) with its own data root and socket under var/engine.

Started here, it has no route out of the machine: no NAT, no forwarding (--iptables=false,
--ip-forward=false), so a container reaches only its own compose network; the image's build
reaches PyPI through the host's network (compose.check.yml). Its data root is kept between
runs, so the stand-in base images and the app image's layers are built once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

# The tool each Debian package brings: dockerd (with containerd and runc), the stand-ins'
# builder.
DEBIAN_PACKAGES = {"docker.io": "dockerd", "mmdebstrap": "mmdebstrap"}


def install_missing(log=print) -> None:
    """Debian's engine and mmdebstrap, installed when missing (as root), else the command."""
    missing = [p for p, tool in DEBIAN_PACKAGES.items() if not shutil.which(tool)]
    if not missing:
        return
    command = ["apt-get", "install", "-y", "-q", *missing]
    if os.geteuid() != 0:
        raise SystemExit(f"compose-check needs {', '.join(missing)}: sudo {' '.join(command)}")
    log(f"installing {', '.join(missing)} from Debian")
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )


def _answers(host: str) -> bool:
    done = subprocess.run(
        ["docker", "-H", host, "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


class Engine:
    def __init__(self, host: str, process: subprocess.Popen | None = None):
        self.host = host
        self.process = process  # set when this check started the engine (and stops it)

    @property
    def docker(self) -> list[str]:
        return ["docker", "-H", self.host]

    @classmethod
    def ensure(cls, root: Path, log=print) -> Engine:
        """The engine of DOCKER_HOST or the system's socket when one answers, else ours."""
        ours = f"unix://{root / 'docker.sock'}"
        for host in (os.environ.get("DOCKER_HOST"), "unix:///var/run/docker.sock", ours):
            if host and _answers(host):
                log(f"container engine: the one running at {host}")
                return cls(host)
        install_missing(log)
        root.mkdir(parents=True, exist_ok=True)
        (root / "docker.sock").unlink(missing_ok=True)
        command = [
            "dockerd",
            f"--data-root={root / 'data'}",
            f"--exec-root=/tmp/inferwatch-engine-{os.getuid()}",
            f"--host={ours}",
            f"--pidfile={root / 'dockerd.pid'}",
            # No NAT and no forwarding: containers reach their own networks only.
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--bip=10.213.0.1/24",
            "--default-address-pool=base=10.214.0.0/16,size=24",
        ]
        log_file = (root / "dockerd.log").open("ab")
        process = subprocess.Popen(
            command, stdout=log_file, stderr=log_file, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while not _answers(ours):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"dockerd did not start: see {root / 'dockerd.log'}")
            time.sleep(0.5)
        log(f"container engine: started Debian's dockerd (data in {root}, socket {ours})")
        return cls(ours, process)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
