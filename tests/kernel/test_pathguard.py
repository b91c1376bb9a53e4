"""The path guard against real files and symlinks: every escape kind, and races between the
check and the use (both a deterministic swap right after the check and a thread flipping a
folder and a symlink in a loop)."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from elowen.core.pathguard import PathGuard
from elowen_sdk import PathGuard as PathGuardProtocol
from elowen_sdk import PathGuardError

SECRET = b"outside secret"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """``work/`` (write root) with ``sub/a.txt``; ``ro/`` (read root) with ``r.txt``;
    ``outside/secret.txt`` next to them."""
    work, ro, outside = tmp_path / "work", tmp_path / "ro", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    ro.mkdir()
    outside.mkdir()
    (work / "sub" / "a.txt").write_bytes(b"inside")
    (ro / "r.txt").write_bytes(b"read only")
    (outside / "secret.txt").write_bytes(SECRET)
    return {"work": work, "ro": ro, "outside": outside}


@pytest.fixture
def guard(tree: dict[str, Path]) -> PathGuard:
    return PathGuard(read_roots=[tree["ro"]], write_roots=[tree["work"]])


def refused(guard: PathGuard, path: object, match: str, *, write: bool = False) -> PathGuardError:
    with pytest.raises(PathGuardError, match=match) as info:
        guard.resolve(path, write=write)  # type: ignore[arg-type]
    return info.value


def test_implements_sdk_protocol(guard: PathGuard, tree: dict[str, Path]) -> None:
    assert isinstance(guard, PathGuardProtocol)
    assert guard.write_roots == (tree["work"].resolve(),)
    assert guard.read_roots == (tree["work"].resolve(), tree["ro"].resolve())  # write roots readable
    assert guard.base == tree["work"].resolve()


def test_reads_writes_inside(guard: PathGuard, tree: dict[str, Path]) -> None:
    assert guard.read_bytes("sub/a.txt") == b"inside"
    assert guard.read_text(tree["ro"] / "r.txt") == "read only"
    assert guard.write_text("sub/new.txt", "héllo") == len("héllo".encode())
    assert (tree["work"] / "sub" / "new.txt").read_text() == "héllo"
    assert guard.listdir("sub") == ["a.txt", "new.txt"]
    assert guard.listdir() == ["sub"]
    assert guard.listdir(tree["ro"]) == ["r.txt"]
    assert guard.resolve("sub/./x/../a.txt") == tree["work"].resolve() / "sub" / "a.txt"
    assert guard.resolve("not/yet/there.txt", write=True) == tree["work"].resolve() / "not/yet/there.txt"


def test_nul_bytes_and_non_paths(guard: PathGuard) -> None:
    refused(guard, "sub/a.txt\x00.png", "NUL byte")
    refused(guard, 42, "not a path")
    refused(guard, b"sub/a.txt", "not a path")


def test_dotdot_escape(guard: PathGuard, tree: dict[str, Path]) -> None:
    refused(guard, "../outside/secret.txt", r"'\.\.' escapes")
    refused(guard, "sub/../../outside/secret.txt", r"'\.\.' escapes")
    refused(guard, "missing/../../../outside", r"'\.\.' escapes")
    with pytest.raises(PathGuardError):
        guard.read_bytes("../outside/secret.txt")


def test_absolute_outside(guard: PathGuard, tree: dict[str, Path]) -> None:
    refused(guard, tree["outside"] / "secret.txt", "outside the roots")
    refused(guard, "/etc/passwd", "outside the roots")
    refused(guard, str(tree["work"]) + "-evil/x", "outside the roots")  # prefix is not a parent


def test_symlink_escapes(guard: PathGuard, tree: dict[str, Path]) -> None:
    work = tree["work"]
    (work / "abs_link").symlink_to(tree["outside"] / "secret.txt")
    (work / "sub" / "rel_link").symlink_to("../../outside/secret.txt")
    (work / "dir_link").symlink_to(tree["outside"])
    (work / "chain1").symlink_to("chain2")
    (work / "chain2").symlink_to("sub/rel_link")
    for path in ("abs_link", "sub/rel_link", "dir_link/secret.txt", "dir_link/new.txt", "chain1"):
        refused(guard, path, "symlink leads outside")
        with pytest.raises(PathGuardError):
            guard.read_bytes(path)
        with pytest.raises(PathGuardError):
            guard.write_bytes(path, b"x")
    assert (tree["outside"] / "secret.txt").read_bytes() == SECRET
    assert not (tree["outside"] / "new.txt").exists()


def test_symlinks_inside_are_followed(guard: PathGuard, tree: dict[str, Path]) -> None:
    work = tree["work"]
    (work / "alias").symlink_to("sub")
    (work / "ro_link").symlink_to(tree["ro"] / "r.txt")
    assert guard.read_bytes("alias/a.txt") == b"inside"
    assert guard.resolve("alias/a.txt") == work.resolve() / "sub" / "a.txt"
    guard.write_bytes("alias/b.txt", b"via alias")
    assert (work / "sub" / "b.txt").read_bytes() == b"via alias"
    assert guard.read_bytes("ro_link") == b"read only"  # readable root through a link
    refused(guard, "ro_link", "outside the write roots", write=True)


def test_symlink_loops(guard: PathGuard, tree: dict[str, Path]) -> None:
    work = tree["work"]
    (work / "self").symlink_to("self")
    (work / "ping").symlink_to("pong")
    (work / "pong").symlink_to("./ping")
    refused(guard, "self", "symlink loop")
    refused(guard, "ping/x", "symlink loop")
    with pytest.raises(PathGuardError, match="symlink loop"):
        guard.read_bytes("pong")


def test_write_roots_only(guard: PathGuard, tree: dict[str, Path]) -> None:
    refused(guard, tree["ro"] / "r.txt", "outside the write roots", write=True)
    with pytest.raises(PathGuardError):
        guard.write_text(tree["ro"] / "new.txt", "x")
    with pytest.raises(PathGuardError):
        guard.mkdir(tree["ro"] / "d")
    assert not (tree["ro"] / "new.txt").exists() and not (tree["ro"] / "d").exists()


def test_write_is_atomic_keeps_mode_and_needs_parent(guard: PathGuard, tree: dict[str, Path]) -> None:
    target = tree["work"] / "sub" / "a.txt"
    os.chmod(target, 0o640)
    ino = target.stat().st_ino
    guard.write_bytes("sub/a.txt", b"replaced")
    assert target.read_bytes() == b"replaced"
    assert target.stat().st_ino != ino  # a new file renamed over the old one
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in (tree["work"] / "sub").iterdir()) == ["a.txt"]  # no temp left
    with pytest.raises(FileNotFoundError):
        guard.write_bytes("no/such/dir/f.txt", b"x")
    with pytest.raises(IsADirectoryError):
        guard.write_bytes("sub", b"x")
    assert guard.mkdir("no/such/dir") == tree["work"].resolve() / "no/such/dir"
    assert guard.mkdir("no/such/dir") == tree["work"].resolve() / "no/such/dir"  # idempotent
    guard.write_bytes("no/such/dir/f.txt", b"x")
    assert (tree["work"] / "no/such/dir/f.txt").read_bytes() == b"x"


def test_roots_given_through_symlinks(tmp_path: Path, tree: dict[str, Path]) -> None:
    (tmp_path / "work_alias").symlink_to(tree["work"])
    g = PathGuard([], [tmp_path / "work_alias"])
    assert g.write_roots == (tree["work"].resolve(),)
    assert g.read_bytes(tmp_path / "work_alias" / "sub" / "a.txt") == b"inside"
    with pytest.raises(ValueError):
        PathGuard([], [])
    with pytest.raises(ValueError):
        PathGuard([tree["ro"]], base=tree["outside"])


# -- races between check and use -----------------------------------------------------------


def swap_to_symlink(folder: Path, target: Path) -> None:
    """Move ``folder`` aside and put a symlink to ``target`` in its place."""
    folder.rename(folder.with_name(folder.name + ".real"))
    folder.symlink_to(target)


@pytest.fixture
def swap_after_check(monkeypatch: pytest.MonkeyPatch, tree: dict[str, Path]):
    """After the guard's check passes, replace ``work/sub`` with a symlink to ``outside``."""
    original = PathGuard._check

    def checked_then_swapped(self: PathGuard, path, write):  # type: ignore[no-untyped-def]
        sub = tree["work"] / "sub"
        if sub.is_symlink():  # undo the previous call's swap so the check passes again
            sub.unlink()
            sub.with_name("sub.real").rename(sub)
        result = original(self, path, write)
        (tree["outside"] / "a.txt").write_bytes(SECRET)
        swap_to_symlink(sub, tree["outside"])
        return result

    monkeypatch.setattr(PathGuard, "_check", checked_then_swapped)


def test_race_parent_swapped_after_check_read(guard: PathGuard, swap_after_check: None) -> None:
    with pytest.raises(PathGuardError, match="became a symlink after the check"):
        guard.read_bytes("sub/a.txt")


def test_race_parent_swapped_after_check_write(guard: PathGuard, tree: dict[str, Path], swap_after_check: None) -> None:
    with pytest.raises(PathGuardError, match="became a symlink after the check"):
        guard.write_bytes("sub/a.txt", b"pwned")
    assert (tree["outside"] / "a.txt").read_bytes() == SECRET


def test_race_parent_swapped_after_check_listdir_mkdir(guard: PathGuard, tree: dict[str, Path], swap_after_check: None) -> None:
    with pytest.raises(PathGuardError, match="became a symlink"):
        guard.mkdir("sub/deeper/dir")
    assert not (tree["outside"] / "deeper").exists()
    with pytest.raises(PathGuardError, match="became a symlink"):
        guard.listdir("sub")


def test_race_final_component_swapped(guard: PathGuard, tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The file itself becomes a symlink after the check: reads refuse it (O_NOFOLLOW), writes
    replace the link and never touch its target."""
    original = PathGuard._check
    target = tree["work"] / "sub" / "a.txt"

    def checked_then_swapped(self: PathGuard, path, write):  # type: ignore[no-untyped-def]
        if target.is_symlink():  # undo the previous call's swap so the check passes again
            target.unlink()
            target.write_bytes(b"inside")
        result = original(self, path, write)
        target.unlink()
        target.symlink_to(tree["outside"] / "secret.txt")
        return result

    monkeypatch.setattr(PathGuard, "_check", checked_then_swapped)
    with pytest.raises(PathGuardError, match="became a symlink"):
        guard.read_bytes("sub/a.txt")
    guard.write_bytes("sub/a.txt", b"mine")
    assert (tree["outside"] / "secret.txt").read_bytes() == SECRET
    assert not target.is_symlink() and target.read_bytes() == b"mine"


def test_race_thread_flipping_folder_and_symlink(guard: PathGuard, tree: dict[str, Path]) -> None:
    """A thread keeps swapping ``work/sub`` between the real folder and a symlink to
    ``outside`` while we read and write through it: the outside is never read or written."""
    work, outside = tree["work"], tree["outside"]
    (outside / "a.txt").write_bytes(SECRET)
    real = work / "sub.real"
    stop = threading.Event()
    flips = 0

    def flipper() -> None:
        nonlocal flips
        sub = work / "sub"
        while not stop.is_set():
            sub.rename(real)
            sub.symlink_to(outside)
            sub.unlink()
            real.rename(sub)
            flips += 1
            time.sleep(0.0002)  # a moment with the real folder in place (else, on a loaded machine, no call ever lands in one)

    t = threading.Thread(target=flipper)
    t.start()
    outcomes = {"ok": 0, "refused": 0, "missing": 0}
    try:
        i = 0
        deadline = time.monotonic() + 30
        # at least 3,000 calls, and on until both outcomes were seen (bounded): whether a call
        # lands between flips depends on scheduling, what it may touch does not
        while i < 3000 or (not (outcomes["ok"] and outcomes["refused"]) and time.monotonic() < deadline):
            i += 1
            try:
                if i % 2:
                    data = guard.read_bytes("sub/a.txt")
                    assert data != SECRET
                else:
                    guard.write_bytes("sub/a.txt", b"inside")
                outcomes["ok"] += 1
            except PathGuardError:
                outcomes["refused"] += 1
            except FileNotFoundError:
                outcomes["missing"] += 1
    finally:
        stop.set()
        t.join()
    assert (outside / "a.txt").read_bytes() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["a.txt", "secret.txt"]  # no temp files
    assert flips > 10 and outcomes["ok"] > 0 and outcomes["refused"] > 0, (flips, outcomes)


def test_file_used_as_folder_is_an_ordinary_error(guard: PathGuard) -> None:
    with pytest.raises(NotADirectoryError):
        guard.read_bytes("sub/a.txt/x")
    with pytest.raises(NotADirectoryError):
        guard.listdir("sub/a.txt")


def test_resolve_does_not_step_over_a_missing_folder_into_a_symlink(tmp_path: Path) -> None:
    """``nope/../link/x`` used to resolve lexically to ``root/link/x`` although ``link`` points
    outside the roots (``terminal.run``'s cwd and the destructive check's cwd use resolve())."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    guard = PathGuard([root], [root])
    for path in ("nope/../link/x", "nope/../link", "a/b/../../link/x"):
        with pytest.raises(PathGuardError):
            guard.resolve(root / path)
        with pytest.raises(PathGuardError):
            guard.resolve(root / path, write=True)
    assert guard.resolve(root / "nope" / "x") == (root / "nope" / "x").resolve()


def test_read_refuses_fifos_and_devices_without_blocking(tmp_path: Path) -> None:
    """A FIFO used to block ``read_bytes`` forever (no ``O_NONBLOCK``, no regular-file check)."""
    os.mkfifo(tmp_path / "pipe")
    guard = PathGuard([tmp_path, Path("/dev")], [tmp_path])
    done: list[BaseException | bytes] = []

    def read() -> None:
        try:
            done.append(guard.read_bytes(tmp_path / "pipe"))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            done.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(3)
    if not done:  # unblock the reader so the thread ends, then fail
        with open(tmp_path / "pipe", "wb"):
            pass
        pytest.fail("read_bytes blocked on a FIFO")
    assert isinstance(done[0], PathGuardError) and "regular file" in str(done[0])
    with pytest.raises(PathGuardError, match="regular file"):
        guard.read_bytes("/dev/zero")
    (tmp_path / "big").write_bytes(b"x" * 10_000)
    assert guard.read_bytes(tmp_path / "big", limit=100) == b"x" * 100
    with pytest.raises(IsADirectoryError):
        guard.read_bytes(tmp_path)
