"""Who holds a claim: ``host:pid:...`` names, and whether such a holder on this host is still alive."""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["alive", "process_owner", "retire"]

_RETIRED: set[str] = set()  # owners of this process that are gone (a closed CallService)


def process_owner() -> str:
    """``host:pid:random``: unique per process, and tells a later process on this host whether it is gone."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def retire(owner: str) -> None:
    """`owner` (of this process) holds nothing any more: a claim it left behind is taken over at once."""
    _RETIRED.add(owner)


def alive(owner: str) -> bool:
    """False only when `owner` names a process of this host that no longer exists (e.g. SIGKILLed), or an owner
    of this process that was retired."""
    if owner in _RETIRED:
        return False
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
