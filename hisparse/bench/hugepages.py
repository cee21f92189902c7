"""Explicit huge pages (hugetlbfs) for the ``hugetlb-2m`` / ``hugetlb-1g`` host pools: how many a sweep
asks the kernel to reserve, and how many it got.

An ``mmap(MAP_HUGETLB)`` only succeeds from the pool of pages reserved in
``/sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages``. The kernel fills that pool from free,
physically contiguous memory: easy at boot (kernel command line ``hugepagesz=1G hugepages=N``), harder on
a running node whose memory is fragmented (1 GiB pages: 2 of 13 asked were granted on the H200 node,
2026-12-04). So a run reserves what its sweep needs before anything else allocates (hisparse/bench/session.py),
records what it asked for and what it got, and gives the pages back once the kind's cases are done.
Writing ``nr_hugepages`` needs root (CAP_SYS_ADMIN); without it the reservation records the error and
the cases of the kind use whatever was reserved already, or are skipped.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

SYSFS = Path("/sys")
# host_alloc kind -> huge page size (bytes); the kinds hisparse/bench/host_alloc.py maps with MAP_HUGETLB
PAGE_BYTES = {"hugetlb-2m": 2 << 20, "hugetlb-1g": 1 << 30}


@dataclass(frozen=True)
class Reservation:
    """One pool size's reservation: ``needed`` pages for the sweep, ``nr_hugepages`` ``before`` and as
    ``asked`` (written; equal to ``before`` when enough pages were free) and as ``got`` (read back), and
    ``free`` pages after. ``error``: why the write failed (EPERM without root, no such pool)."""

    kind: str
    page_bytes: int
    needed: int
    before: int
    asked: int
    got: int
    free: int
    error: str | None = None

    @property
    def raised(self) -> bool:
        """Whether this reservation added pages (and must give them back)."""
        return self.error is None and self.asked > self.before

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def pool_dir(page_bytes: int, root: Path = SYSFS) -> Path:
    return root / "kernel/mm/hugepages" / f"hugepages-{page_bytes >> 10}kB"


def pages_for(nbytes: int, page_bytes: int) -> int:
    return -(-nbytes // page_bytes)


def _read(path: Path) -> int:
    return int(path.read_text().strip())


def reserve(kind: str, nbytes: int, root: Path = SYSFS) -> Reservation:
    """Make at least ``nbytes`` of ``kind``'s huge pages free: raise ``nr_hugepages`` by the shortfall
    (never lower it). Never raises: a failure is the Reservation's ``error``."""
    page = PAGE_BYTES[kind]
    needed = pages_for(nbytes, page)
    d = pool_dir(page, root)
    try:
        before, free = _read(d / "nr_hugepages"), _read(d / "free_hugepages")
    except (OSError, ValueError) as e:
        return Reservation(kind, page, needed, 0, 0, 0, 0, f"cannot read {d}: {e}")
    asked, error = before, None
    if free < needed:
        asked = before + needed - free
        try:
            (d / "nr_hugepages").write_text(f"{asked}\n")
        except OSError as e:  # EPERM/EACCES without root; the pool stays as it was
            error = f"cannot write {d / 'nr_hugepages'} = {asked}: {e.strerror or e}"
    got, free_after = _read(d / "nr_hugepages"), _read(d / "free_hugepages")
    return Reservation(kind, page, needed, before, asked, got, free_after, error)


def release(reservation: Reservation, root: Path = SYSFS) -> None:
    """Give back the pages ``reservation`` added (pages still mapped become surplus and are freed when
    unmapped). Never raises."""
    if not reservation.raised:
        return
    try:
        (pool_dir(reservation.page_bytes, root) / "nr_hugepages").write_text(f"{reservation.before}\n")
    except OSError:
        pass


def shortfall(kind: str, nbytes: int, root: Path = SYSFS) -> str:
    """Why ``nbytes`` of ``kind`` cannot be mapped, in the pool's own numbers (for a skip reason)."""
    page = PAGE_BYTES[kind]
    d = pool_dir(page, root)
    try:
        total, free = _read(d / "nr_hugepages"), _read(d / "free_hugepages")
    except (OSError, ValueError):
        return f"no {page >> 20} MiB huge page pool ({d} unreadable)"
    return (f"needs {pages_for(nbytes, page)} free {page >> 20} MiB huge pages, the pool has {free} free of "
            f"{total} (reserve them at boot with hugepagesz= hugepages=, or in {d / 'nr_hugepages'} as root)")


__all__ = ["PAGE_BYTES", "Reservation", "pages_for", "pool_dir", "release", "reserve", "shortfall"]
