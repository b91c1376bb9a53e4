"""Benchmark and figures for the destructive-command analysis (``elowen_sdk.destructive``).

Runs every command of tests/sdk/destructive/corpus/{destructive,benign}.txt through
``check_command`` and prints recall on the destructive corpus (overall and per class: a class is
the ``# heading`` above a line), the false-escalation rate on the benign one (overall and per
class), and the time per check (median and p99 over several rounds, in µs).

    .venv/bin/python bench/destructive.py [--rounds N] [--baseline DIR] [--tree-sitter]

``--baseline DIR`` also loads an older copy of the package from DIR (a directory holding its
``__init__.py`` and ``rules.toml``) and measures it on the same corpus in the same run, checks
interleaved, so the two timings share the machine's load. ``--tree-sitter`` times the
``tree-sitter-bash`` parser against the package's own on the corpus and counts the commands each
cannot parse (needs the ``tree-sitter`` and ``tree-sitter-bash`` wheels importable).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from elowen_sdk import destructive
from elowen_sdk.destructive.shell import ParseError, parse

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "sdk" / "destructive" / "corpus"
_ANNOTATION = re.compile(r"\s+#\s*((?:(?:cwd|checkout|home)=\S+\s*)+)$")

Case = tuple[str, dict[str, str], str]


def load(name: str) -> list[Case]:
    """The corpus ``name`` as (command, check_command keyword arguments, class)."""
    cases: list[Case] = []
    section = "unclassified"
    for line in (CORPUS / f"{name}.txt").read_text().splitlines():
        if line.startswith("# "):
            section = line[2:].strip()
            continue
        if not line.strip() or line.startswith("#"):
            continue
        kwargs = {"cwd": "/srv/repo", "checkout": "/srv/repo", "home": "/home/dev"}
        match = _ANNOTATION.search(line)
        if match:
            kwargs.update(pair.split("=", 1) for pair in match.group(1).split())
            line = line[: match.start()]
        cases.append((line, kwargs, section))
    return cases


def load_baseline(directory: str) -> ModuleType:
    """Import the package copy in ``directory`` as ``elowen_sdk._destructive_baseline``."""
    name = "elowen_sdk._destructive_baseline"
    spec = importlib.util.spec_from_file_location(name, Path(directory) / "__init__.py", submodule_search_locations=[directory])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def figures(label: str, check: Callable[..., object], destructive_cases: list[Case], benign: list[Case], *, verbose: bool) -> None:
    """Print recall and false escalations, overall and per class."""
    missed = [(cmd, cls) for cmd, kw, cls in destructive_cases if not check(cmd, **kw).destructive]  # type: ignore[attr-defined]
    escalated = [(cmd, cls) for cmd, kw, cls in benign if check(cmd, **kw).destructive]  # type: ignore[attr-defined]
    print(f"[{label}] destructive corpus: {len(destructive_cases)} commands, recall {1 - len(missed) / len(destructive_cases):.1%}")
    print(f"[{label}] benign corpus:      {len(benign)} commands, false-escalation rate {len(escalated) / len(benign):.1%}")
    for title, cases, bad, word in (("recall per class", destructive_cases, missed, "caught"), ("false escalations per class", benign, escalated, "escalated")):
        print(f"[{label}] {title}:")
        classes: dict[str, list[int]] = {}
        bad_cmds = {cmd for cmd, _ in bad}
        for cmd, _, cls in cases:
            counts = classes.setdefault(cls, [0, 0])
            counts[0] += 1
            counts[1] += cmd in bad_cmds
        for cls, (total, nbad) in classes.items():
            good = total - nbad if word == "caught" else nbad
            print(f"    {good:3d}/{total:<3d} {word:9s} {cls}")
    if verbose:
        for cmd, _ in missed:
            print(f"  MISSED     {cmd}")
        for cmd, _ in escalated:
            print(f"  ESCALATED  {cmd}")


def percentiles(timings: list[float]) -> str:
    timings = sorted(timings)
    return f"median {statistics.median(timings):.0f} µs, p99 {timings[int(len(timings) * 0.99)]:.0f} µs, mean {statistics.fmean(timings):.0f} µs"


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def tree_sitter(destructive_cases: list[Case], benign: list[Case], rounds: int) -> None:
    """The analysis with tree-sitter-bash underneath (``destructive_treesitter``) against the
    package's own parser: corpus figures, time per check, and parse-only cost and failures."""
    try:
        import tree_sitter
        import tree_sitter_bash

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import destructive_treesitter
    except ImportError as exc:
        print(f"tree-sitter: not importable ({exc})")
        return
    cases = destructive_cases + benign
    with destructive_treesitter.installed():
        figures("tree-sitter", destructive.check_command, destructive_cases, benign, verbose=True)
    own_checks, ts_checks = [], []
    for _ in range(rounds):
        for cmd, kw, _ in cases:
            own_checks.append(timed(lambda c=cmd, k=kw: destructive.check_command(c, **k)))
            with destructive_treesitter.installed():
                ts_checks.append(timed(lambda c=cmd, k=kw: destructive.check_command(c, **k)))
    print(f"[current]     time per check: {percentiles(own_checks)}")
    print(f"[tree-sitter] time per check: {percentiles(ts_checks)}")
    ts = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    own_errors = sum(1 for cmd, _, _ in cases if _fails(parse, cmd))
    ts_errors = [cmd for cmd, _, _ in cases if ts.parse(cmd.encode()).root_node.has_error]
    own, other = [], []
    for _ in range(rounds):
        for cmd, _, _ in cases:
            own.append(timed(lambda c=cmd: _fails(parse, c)))
            other.append(timed(lambda c=cmd: ts.parse(c.encode())))
    print(f"parse only, own parser:       {percentiles(own)}; {own_errors} of {len(cases)} commands unparseable")
    print(f"parse only, tree-sitter-bash: {percentiles(other)}; {len(ts_errors)} of {len(cases)} commands with ERROR/MISSING nodes")


def _fails(fn: Callable[[str], object], cmd: str) -> bool:
    try:
        fn(cmd)
    except ParseError:
        return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="directory of an older copy of elowen_sdk/destructive to compare against")
    parser.add_argument("--tree-sitter", action="store_true", help="also time tree-sitter-bash's parser on the corpus")
    args = parser.parse_args()
    started = time.perf_counter()
    destructive.load_rules()
    print(f"rules loaded in {(time.perf_counter() - started) * 1e3:.1f} ms")
    destructive_cases, benign = load("destructive"), load("benign")
    checks: list[tuple[str, Callable[..., object]]] = [("current", destructive.check_command)]
    if args.baseline:
        base = load_baseline(args.baseline)
        base.load_rules()
        checks.append(("baseline", base.check_command))
    for label, check in checks:
        figures(label, check, destructive_cases, benign, verbose=label == "current")
    timings: dict[str, list[float]] = {label: [] for label, _ in checks}
    for _ in range(args.rounds):
        for cmd, kw, _ in destructive_cases + benign:
            for label, check in checks:
                timings[label].append(timed(lambda f=check, c=cmd, k=kw: f(c, **k)))
    for label, _ in checks:
        print(f"[{label}] time per check: {percentiles(timings[label])} ({len(timings[label])} checks)")
    if args.tree_sitter:
        tree_sitter(destructive_cases, benign, args.rounds)


if __name__ == "__main__":
    main()
