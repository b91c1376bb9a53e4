"""Every exception class Elowen defines is rooted at :class:`elowen_sdk.ElowenError`, so a caller
(a plugin, the CLI, a host) can catch "anything Elowen refused" with one class. A class may keep a
standard-library base beside it (``class X(ElowenError, ValueError)``) where callers catch that.

The walk imports every module of the kernel (``elowen``), the SDK (``elowen_sdk``), the builtin
plugins (``elowen_builtins``) and the packages under ``contrib/`` in a separate interpreter (so
the imports do not leak into this test session, where some tests check what discovery imports),
and lists each exception class defined there that is not an ``ElowenError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTRIB = REPO / "contrib"

#: ``"module.Class": reason`` for classes that cannot be ElowenErrors (e.g. a third-party library
#: requires its own base). Empty today; a listed class that is an ElowenError (or gone) fails.
ALLOWED: dict[str, str] = {}

_WALK = r"""
import importlib, inspect, json, pkgutil, sys
from elowen_sdk import ElowenError
roots, extra = json.loads(sys.argv[1])
sys.path[:0] = extra
found, failed, seen = [], [], 0
for root in roots:
    pkg = importlib.import_module(root)
    names = [root] + [m.name for m in pkgutil.walk_packages(pkg.__path__, root + ".")]
    for name in names:
        if name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # reported: every module must import
            failed.append(f"{name}: {exc!r}")
            continue
        seen += 1
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                if not issubclass(value, ElowenError):
                    found.append(f"{name}.{attr}")
print(json.dumps({"found": sorted(found), "failed": failed, "seen": seen}))
"""


def _contrib_packages() -> tuple[list[str], list[str]]:
    """``(package names, sys.path entries)`` of the distributions under ``contrib/``."""
    names: list[str] = []
    paths: list[str] = []
    for dist in sorted(p for p in CONTRIB.iterdir() if p.is_dir()):
        for pkg in sorted(p for p in dist.iterdir() if (p / "__init__.py").is_file() and p.name not in ("tests", "build")):
            names.append(pkg.name)
            paths.append(str(dist))
    return names, paths


def _walk() -> dict[str, object]:
    contrib, paths = _contrib_packages()
    roots = ["elowen_sdk", "elowen", "elowen_builtins", *contrib]
    out = subprocess.run(
        [sys.executable, "-c", _WALK, json.dumps([roots, paths])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_every_exception_is_an_elowen_error() -> None:
    result = _walk()
    assert not result["failed"], f"modules that do not import: {result['failed']}"
    assert isinstance(result["seen"], int) and result["seen"] > 100, result["seen"]  # the walk reached the packages
    found = set(result["found"])  # type: ignore[arg-type]
    offenders = sorted(found - set(ALLOWED))
    assert not offenders, "exception classes not rooted at elowen_sdk.ElowenError (add it as the first base): " + ", ".join(offenders)
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"ALLOWED lists classes that are ElowenErrors now (or gone): {stale}"


def test_the_walk_finds_a_stray_exception(tmp_path: Path) -> None:
    """The walk itself can fail: a package with a plain ``Exception`` subclass is reported."""
    pkg = tmp_path / "stray_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from elowen_sdk import ElowenError\n\nclass Fine(ElowenError, ValueError):\n    pass\n")
    (pkg / "mod.py").write_text("class Stray(RuntimeError):\n    pass\n")
    out = subprocess.run([sys.executable, "-c", _WALK, json.dumps([["stray_pkg"], [str(tmp_path)]])], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["found"] == ["stray_pkg.mod.Stray"]
