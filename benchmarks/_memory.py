"""Peak-memory helpers the benchmark scripts share (Linux ``/proc``)."""

from __future__ import annotations


def peak_reset() -> None:
    """Reset the process's peak resident size: ``VmHWM`` then covers only what follows.

    Writing 5 to ``clear_refs`` does it (Linux ≥ 4.0).
    """
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def status_mb(key: str) -> float:
    """A ``/proc/self/status`` size field (``VmRSS``, ``VmHWM``, …) in MB; NaN if absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")
