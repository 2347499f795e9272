"""A run owns its directory: an OS-level lock held for the run's life, and no debris.

The lock is ``flock`` on ``<run>/.lock``: the kernel releases it when the process ends, however it
ends (a ``kill -9`` leaves no stale lock), so a second run on the same directory is refused
(within half a second) with the holder's process id, and a later run may take it over. Under torchrun rank 0
holds it for the whole group.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from pathlib import Path

LOCK_NAME = ".lock"


class RunLocked(ValueError):
    """Another live process holds the run directory."""


def live_holder(path: Path) -> str | None:
    """The process id of the live run holding ``path``'s lock, or None when no process does (or
    there is no lock to hold). Only looks: the lock is released at once when it was free."""
    try:
        handle = open(Path(path) / LOCK_NAME)
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return handle.read().strip() or "unknown"
            raise
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


def _lock_soon(handle, tries: int = 20, wait_s: float = 0.025) -> None:
    """Take ``handle``'s exclusive lock, trying again for about half a second: :func:`live_holder`
    holds a shared lock for an instant to look, and a run starting in that instant must not be
    refused as if another run held the directory."""
    for attempt in range(tries):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or attempt == tries - 1:
                raise
            time.sleep(wait_s)


class RunDirectory:
    """``path``, locked for this process while the object lives (``release()`` or process exit)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._handle = None
        self._created: list[Path] = []  # directories this run made, deepest first

    def acquire(self) -> "RunDirectory":
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"run directory {self.path} exists and is not a directory: choose another "
                             f"--run-dir or --run-name")
        try:
            missing = [p for p in (self.path, *self.path.parents) if not p.exists()]
            self.path.mkdir(parents=True, exist_ok=True)
            self._created = missing
        except OSError as exc:
            raise ValueError(f"cannot create run directory {self.path}: {exc.strerror or exc}") from exc
        try:
            handle = open(self.path / LOCK_NAME, "a+")
        except OSError as exc:  # a directory this user may not write to
            self.discard_if_new()
            raise ValueError(f"cannot write in run directory {self.path}: {exc.strerror or exc}") from exc
        try:
            _lock_soon(handle)
        except OSError as exc:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise RunLocked(f"{self.path} is in use by another run (process {holder}); wait for it to end "
                                f"(or, for a new run, choose another --run-name)") from None
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        self.remove_orphan_temporaries()
        return self

    def remove_orphan_temporaries(self) -> list[Path]:
        """Checkpoint writes interrupted by a kill leave ``.NAME.pt.*.tmp`` behind: remove them
        (safe: this process holds the lock, so no other run is writing here)."""
        orphans = sorted(self.path.glob(".*.pt.*.tmp"))
        for orphan in orphans:
            orphan.unlink(missing_ok=True)
        return orphans

    def discard_if_new(self) -> None:
        """Undo a start that failed before it wrote anything: remove the directories this run made
        (the run's, and any parents it had to create, where nothing else was put meanwhile)."""
        if self._created and not any(p.suffix == ".pt" for p in self.path.iterdir()):
            self.release()
            shutil.rmtree(self.path, ignore_errors=True)
            for parent in self._created[1:]:
                try:
                    parent.rmdir()  # only if empty: never another run's files
                except OSError:
                    break

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
