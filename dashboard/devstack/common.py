"""What every part of the devstack shares: where its files go, the one-line error a user
can act on, and signalling processes that may already be gone."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent
MANAGE = str(BASE_DIR / "manage.py")
STOP_GRACE_S = 10.0


def var_dir() -> Path:
    return Path(os.environ.get("INFERWATCH_VAR_DIR", BASE_DIR / "var"))


class StackError(Exception):
    """A problem the user can fix; its message is the one line they see."""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
