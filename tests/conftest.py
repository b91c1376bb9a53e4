"""Suite-wide checks.

``no_leftovers``: at the end of the run, every tmux server (private ``-L`` sockets), Elowen
daemon or web process, scripted model server and agent CLI the suite started must be gone.
It fails the run (listing each process) otherwise. Only processes carrying this run's marker
in their environment count (see ``tests/support/leaks.py``), so parallel runs do not interfere.
``ELOWEN_TEST_LEAK_CHECK=0`` turns the check off.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.support.leaks import RUN_MARKER, leaks_since, snapshot

# set at import, before any fixture starts a process: every child inherits it
_RUN_ID = os.environ[RUN_MARKER] = uuid.uuid4().hex
# the scripted fake CLI writes its log outside the project folder, which the agent sandbox makes
# read-only: agents of providers left at sandbox = "auto" run unsandboxed in the suite; the
# sandbox tests (tests/agents/test_sandbox*.py, tests/e2e/test_sandbox_e2e.py) set "bwrap" themselves
os.environ.setdefault("ELOWEN_AGENT_SANDBOX", "none")


@pytest.fixture(scope="session", autouse=True)
def no_leftovers() -> Iterator[None]:
    if os.environ.get("ELOWEN_TEST_LEAK_CHECK", "1") == "0":
        yield
        return
    before = snapshot(_RUN_ID)
    yield
    leaks = leaks_since(before, _RUN_ID)
    if leaks:
        pytest.fail("the test run left these processes running:\n" + "\n".join(f"  {leak}" for leak in leaks), pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A slow end-to-end test (real agent CLIs, a browser, real daemons racing real deadlines on
    a shared 2-core machine) that fails is run once more before it counts as failed; the
    rerun is reported (``R`` in the progress line, "rerun" in the summary). Fast tests are
    never rerun."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=1, reruns_delay=2))
