"""The archive in a directory: the default, a folder in the user's data directory.

File I/O runs in a thread, so a slow or stuck disk never stalls the event loop. A record file is
written to a temporary name and linked into place, so a reader never sees half a file and an
existing file is never overwritten (``os.link`` refuses an existing name); it is then read-only.
Keys come only from ``worker.archive.ids`` (day folders, UUIDs, base32 digests), and are checked
again here to stay inside the root.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import shutil
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, ParamSpec, TypeVar

from worker.archive.ids import RECORDS
from worker.archive.store import StoreFailed

P = ParamSpec("P")
R = TypeVar("R")

CHUNK = 1 << 20
_KEY = re.compile(r"records/\d{4}-\d{2}-\d{2}/[0-9a-f-]{36}\.warc\.gz")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class DirectoryStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def where(self) -> str:
        return str(self.root)

    @property
    def identity(self) -> str:
        return f"{socket.gethostname()}:{self.root}"

    def _path(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise StoreFailed("not an archive key")
        return self.root / key

    async def create(self, key: str, data: bytes) -> None:
        path = self._path(key)
        await _io(_create, path, data)

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        path = self._path(key)
        handle = await _io(_open, path)
        try:
            while chunk := await _io(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def days(self) -> list[str]:
        return await _io(_days, self.root / RECORDS)

    async def delete_day(self, day: str) -> int:
        if not _DAY.fullmatch(day):
            raise StoreFailed("not a day folder")
        return await _io(_delete_tree, self.root / RECORDS / day)

    async def close(self) -> None:
        return None


async def _io(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run blocking file I/O in a thread; every OS failure becomes a StoreFailed that names it."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except OSError as exc:
        raise StoreFailed(_reason(exc)) from None


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "the directory is not writable"
    if exc.errno in (errno.ENOTDIR, errno.EISDIR):
        return "the archive path is not a usable directory"
    if exc.errno == errno.EEXIST:
        return "the file exists already"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def _temporary(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def _write_file(path: Path, data: bytes) -> None:
    # Not fsynced: on a shared disk a sync per record costs more than the write, on the path a
    # fetch waits on. The file system orders the data before the link that names it (ext4 and
    # XFS by default); a power cut can lose the last records, not leave half of one.
    with open(path, "xb") as handle:
        handle.write(data)


def _create(path: Path, data: bytes) -> None:
    temporary = _temporary(path)
    try:
        _write_file(temporary, data)
        os.chmod(temporary, 0o444)
        os.link(temporary, path)  # refuses an existing name: a record is never overwritten
    finally:
        temporary.unlink(missing_ok=True)


def _open(path: Path) -> IO[bytes]:
    return open(path, "rb")


def _days(folder: Path) -> list[str]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if _DAY.fullmatch(name))


def _delete_tree(folder: Path) -> int:
    try:
        count = sum(len(files) for _, _, files in os.walk(folder))
    except FileNotFoundError:
        return 0
    shutil.rmtree(folder, ignore_errors=True)
    return count
