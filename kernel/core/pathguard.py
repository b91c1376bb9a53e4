"""The path guard: pins file access to granted roots, without a check-to-use race.

Implements :class:`elowen_sdk.PathGuard` (plugin API 1).

Checking: :meth:`PathGuard.resolve` resolves a path the way the kernel will (each symlink
followed, ``..`` applied to the real parent, loops detected after 40 links) and refuses the
result unless it lies inside a root. Refused: NUL bytes, ``..`` escapes, absolute paths outside
the roots, symlinks (relative or absolute, also as a parent) leading out, symlink loops, and
writes outside the write roots.

Using: the file helpers open the checked real path by walking from the root's directory fd,
one ``os.open(component, O_DIRECTORY | O_NOFOLLOW, dir_fd=...)`` per component and
``O_NOFOLLOW`` on the last one. The real path has no symlinks in it, so a component swapped
for a symlink after the check fails with ``ELOOP``/``ENOTDIR`` and is refused.

Not covered (state it, do not pretend): hard links to outside files created by someone who
can already write inside a root, and a root folder itself being replaced by its owner.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from elowen_sdk import PathGuardError

__all__ = ["MAX_SYMLINKS", "PathGuard"]

#: Symlinks followed while resolving one path before it counts as a loop (Linux's limit).
MAX_SYMLINKS = 40

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _real_root(root: str | os.PathLike[str]) -> Path:
    text = os.fspath(root)
    if "\x00" in text:
        raise ValueError(f"root contains a NUL byte: {text!r}")
    return Path(os.path.realpath(os.path.abspath(text)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class PathGuard:
    """File access confined to ``read_roots`` and ``write_roots`` (write roots are readable).

    Args:
        read_roots: folders that may be read.
        write_roots: folders that may be read and written.
        base: where relative paths start; default the first write root, else the first read
            root. It must lie inside a root.

    Roots are resolved (symlinks followed) once, here; they need not exist yet.

    Raises:
        ValueError: no roots at all, or ``base`` outside them.
    """

    def __init__(
        self,
        read_roots: Iterable[str | os.PathLike[str]],
        write_roots: Iterable[str | os.PathLike[str]] = (),
        *,
        base: str | os.PathLike[str] | None = None,
    ) -> None:
        writes = tuple(dict.fromkeys(_real_root(r) for r in write_roots))
        reads = tuple(dict.fromkeys((*writes, *(_real_root(r) for r in read_roots))))
        if not reads:
            raise ValueError("a path guard needs at least one root")
        self._write_roots = writes
        self._read_roots = reads
        self._base = _real_root(base) if base is not None else reads[0]
        if self._root_of(str(self._base), reads) is None:
            raise ValueError(f"base {self._base} is outside the roots")

    @property
    def read_roots(self) -> tuple[Path, ...]:
        """Every readable root (the write roots first), resolved."""
        return self._read_roots

    @property
    def write_roots(self) -> tuple[Path, ...]:
        """The writable roots, resolved."""
        return self._write_roots

    @property
    def base(self) -> Path:
        """Where relative paths start."""
        return self._base

    def __repr__(self) -> str:
        return f"PathGuard(read={[str(r) for r in self._read_roots]}, write={[str(r) for r in self._write_roots]})"

    # -- checking ----------------------------------------------------------------------------

    @staticmethod
    def _root_of(path: str, roots: Iterable[Path]) -> Path | None:
        best: Path | None = None
        for root in roots:
            if _inside(path, str(root)) and (best is None or len(str(root)) > len(str(best))):
                best = root
        return best

    def _absolute(self, path: str | os.PathLike[str]) -> str:
        if not isinstance(path, (str, os.PathLike)):
            raise PathGuardError(path, f"not a path: {path.__class__.__name__}")
        text = os.fspath(path)
        if not isinstance(text, str):
            raise PathGuardError(path, "bytes paths are not accepted")
        if "\x00" in text:
            raise PathGuardError(path, "contains a NUL byte")
        return text if os.path.isabs(text) else os.path.join(str(self._base), text)

    @staticmethod
    def _real(absolute: str, original: object) -> str:
        """Resolve like the kernel: follow each symlink, apply ``..`` to the real parent.

        Components below a missing one are kept as they are; a ``..`` leading back out of them
        resumes resolving from the real folder (``nope/../link/x`` follows ``link``).
        """
        parts = deque(p for p in absolute.split("/") if p)
        current = "/"
        missing: list[str] = []  # components below the first missing one (nothing to follow)
        links = 0
        while parts:
            name = parts.popleft()
            if name == ".":
                continue
            if name == "..":
                # a `..` back out of the missing part returns to a real folder, whose next
                # components are resolved (symlinks followed) again, never taken lexically
                if missing:
                    missing.pop()
                else:
                    current = os.path.dirname(current)
                continue
            if missing:
                missing.append(name)
                continue
            candidate = os.path.join(current, name)
            try:
                st = os.lstat(candidate)
            except (FileNotFoundError, NotADirectoryError):
                missing.append(name)
                continue
            if not stat.S_ISLNK(st.st_mode):
                current = candidate
                continue
            links += 1
            if links > MAX_SYMLINKS:
                raise PathGuardError(original, f"symlink loop (more than {MAX_SYMLINKS} links) at {candidate}")
            try:
                target = os.readlink(candidate)
            except OSError:  # swapped for a non-link (or removed) since the lstat: a race
                raise PathGuardError(original, f"{candidate} changed while it was resolved") from None
            parts.extendleft(reversed([p for p in target.split("/") if p]))
            if target.startswith("/"):
                current = "/"
        return os.path.normpath(os.path.join(current, *missing)) if missing else current

    def _check(self, path: str | os.PathLike[str], write: bool) -> tuple[str, Path]:
        absolute = self._absolute(path)
        real = self._real(absolute, path)
        roots = self._write_roots if write else self._read_roots
        root = self._root_of(real, roots)
        if root is not None:
            return real, root
        lexical = os.path.normpath(absolute)
        if write and self._root_of(real, self._read_roots) is not None:
            reason = f"{real} is readable but outside the write roots"
        elif self._root_of(lexical, roots) is not None:
            reason = f"a symlink leads outside the roots (to {real})"
        elif ".." in absolute.split("/"):
            reason = f"'..' escapes the roots (to {real})"
        else:
            reason = f"{real} is outside the roots"
        raise PathGuardError(path, reason)

    def resolve(self, path: str | os.PathLike[str], *, write: bool = False) -> Path:
        """The real absolute path of ``path``, checked against the roots.

        Relative paths start at :attr:`base`. The path need not exist.

        Raises:
            PathGuardError: refused; ``reason`` says why.
        """
        return Path(self._check(path, write)[0])

    # -- race-free opening -------------------------------------------------------------------

    def _walk(self, path: str | os.PathLike[str], write: bool, *, create_dirs: bool = False) -> tuple[int, str, str]:
        """Check ``path``, then open its parent folder by walking from the root.

        Returns ``(parent_fd, last_name, real_path)``; the caller closes ``parent_fd``.
        ``last_name`` is ``""`` when the path is the root itself.
        """
        real, root = self._check(path, write)
        rel = [p for p in real[len(str(root)) :].split("/") if p]
        try:
            fd = os.open(root, _DIR_FLAGS)
        except OSError as exc:
            raise self._walk_error(path, str(root), exc) from None
        here = str(root)
        for name in rel[:-1]:
            here = os.path.join(here, name)
            fd = self._open_dir(fd, name, here, path, create=create_dirs)  # closes the old fd
        return fd, rel[-1] if rel else "", real

    def _open_dir(self, parent: int, name: str, here: str, original: object, *, create: bool) -> int:
        """Open ``name`` under ``parent`` as a directory without following links; closes
        ``parent`` and returns the new fd."""
        try:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=parent)
                child = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise self._walk_error(original, here, exc, parent=parent, name=name) from None
        finally:
            os.close(parent)
        return child

    @staticmethod
    def _walk_error(original: object, here: str, exc: OSError, *, parent: int | None = None, name: str = "") -> OSError:
        """Turn an ``O_NOFOLLOW``/``O_DIRECTORY`` refusal into a :class:`PathGuardError`.

        ``ELOOP``/``ENOTDIR`` on a component the check saw as a folder (or as a plain file, for
        the last one) means it was swapped in between; a component that is a plain file now
        is an ordinary error (``a.txt/x``), returned as is.
        """
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            return exc
        try:
            if parent is not None:
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            else:
                mode = os.lstat(here).st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            return PathGuardError(original, f"{here} became a symlink after the check")
        if exc.errno == errno.ENOTDIR and mode is not None and not stat.S_ISDIR(mode):
            return exc
        return PathGuardError(original, f"{here} changed after the check (it was a symlink when opened)")

    def _open_file(self, path: str | os.PathLike[str], flags: int, write: bool, mode: int = 0o666) -> int:
        parent, name, real = self._walk(path, write)
        try:
            if not name:
                raise IsADirectoryError(errno.EISDIR, "is a root folder", real)
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
            except OSError as exc:
                raise self._walk_error(path, real, exc, parent=parent, name=name) from None
        finally:
            os.close(parent)

    # -- file helpers ------------------------------------------------------------------------

    def read_bytes(self, path: str | os.PathLike[str], *, limit: int | None = None) -> bytes:
        """The file's content (at most ``limit`` bytes when given).

        The file is opened non-blocking and must be a regular file: a FIFO, device or socket
        is refused at once (reading one would wait forever).

        Raises:
            PathGuardError: refused (also when a component became a symlink after the check,
                or the path is not a regular file).
            OSError: as ``open`` would (missing file, a folder, …).
        """
        fd = self._open_file(path, os.O_RDONLY | os.O_NONBLOCK, write=False)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a folder", os.fspath(path))
            if not stat.S_ISREG(st.st_mode):
                raise PathGuardError(path, "not a regular file (a FIFO, device or socket)")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            return fh.read() if limit is None else fh.read(max(0, limit))

    def read_text(self, path: str | os.PathLike[str], encoding: str = "utf-8") -> str:
        """The file's content decoded with ``encoding``; errors as :meth:`read_bytes`."""
        return self.read_bytes(path).decode(encoding)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> int:
        """Replace the file's content atomically; returns the bytes written.

        Writes a temporary file beside it (created with ``O_EXCL | O_NOFOLLOW``), fsyncs it and
        renames it over the target, so readers see the old or the new content, never a part.
        An existing file keeps its permission bits. The parent folder must exist
        (see :meth:`mkdir`).

        Raises:
            PathGuardError: refused (outside the write roots, escapes, races).
            OSError: as ``open`` would (missing parent, target is a folder, …).
        """
        parent, name, real = self._walk(path, write=True)
        try:
            if not name:
                raise IsADirectoryError(errno.EISDIR, "is a root folder", real)
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                keep_mode: int | None = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "is a folder", real)
            except FileNotFoundError:
                keep_mode = None
            tmp = f".{name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    if keep_mode is not None:
                        os.fchmod(fh.fileno(), keep_mode)
                    os.fsync(fh.fileno())
                # rename never follows a symlink at the target: a swapped-in link is replaced.
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            return len(data)
        finally:
            os.close(parent)

    def write_text(self, path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> int:
        """:meth:`write_bytes` of ``text`` encoded; returns the bytes written."""
        return self.write_bytes(path, text.encode(encoding))

    def listdir(self, path: str | os.PathLike[str] = ".") -> list[str]:
        """The folder's entry names, sorted.

        Raises:
            PathGuardError: refused. OSError: missing, or not a folder.
        """
        parent, name, real = self._walk(path, write=False)
        fd = self._open_dir(parent, name, real, path, create=False) if name else parent
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def mkdir(self, path: str | os.PathLike[str]) -> Path:
        """Create the folder and any missing parents (like ``mkdir -p``); returns its real path.

        Raises:
            PathGuardError: refused. OSError: a component exists and is not a folder.
        """
        parent, name, real = self._walk(path, write=True, create_dirs=True)
        if name:
            parent = self._open_dir(parent, name, real, path, create=True)
        os.close(parent)
        return Path(real)
