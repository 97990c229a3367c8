"""CPU time of other processes on this machine, from ``/proc``: what the benches charge a
server (gunicorn's master and workers, a PostgreSQL server's processes) per request or phase.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TICKS_PER_SECOND", "cpu_ticks"]

#: The unit of ``/proc/<pid>/stat``'s times.
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int, *, reaped_children: bool = False) -> int:
    """User and system time of ``pid`` in clock ticks (0 once it is gone); with
    ``reaped_children``, also that of the children it has waited for (a worker that exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rfind(")") + 2 :].split()  # after the name, which may hold spaces
    total = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped_children:
        total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total
