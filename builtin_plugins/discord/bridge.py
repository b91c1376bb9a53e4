"""An asyncio event loop in its own thread, bridged to trio.

discord.py is an asyncio library; Elowen's kernel is trio. The Discord client runs on a private
asyncio loop in a daemon thread (:class:`AsyncioThread`), so a slow or wedged library callback
can never stall the trio kernel (fail-open), and the trio side can always see, time out and
abandon a deaf or wedged client (the inbound-silence watchdog).

Two directions, both without blocking either loop:

* trio → asyncio: :meth:`AsyncioThread.call` schedules a coroutine with
  ``asyncio.run_coroutine_threadsafe`` and waits on a ``trio.Event`` set from the future's done
  callback through the trio token (no worker thread held per call); a trio cancellation or
  timeout cancels the asyncio future.
* asyncio → trio: :meth:`AsyncioThread.to_trio` hands a sync callable to
  ``TrioToken.run_sync_soon`` (the adapter's ``send_nowait`` into a bounded memory channel).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import trio

from elowen_sdk import ElowenError

__all__ = ["AsyncioThread", "BridgeClosed"]

log = logging.getLogger("elowen.plugin.discord")


class BridgeClosed(ElowenError):
    """The asyncio thread is stopped (or never started)."""


class AsyncioThread:
    """A private asyncio loop running in a daemon thread (``name``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._token = trio.lowlevel.current_trio_token()
        self._stopped = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            except Exception:
                log.exception("%s: closing the asyncio loop failed", self.name)
            finally:
                self.loop.close()
                self._stopped.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def to_trio(self, fn: Callable[..., Any], *args: Any) -> bool:
        """From the asyncio thread: run ``fn(*args)`` soon in trio. ``False`` when trio is
        gone (the call is dropped)."""
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            return False
        return True

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Schedule ``coro`` on the loop (any thread); the concurrent future of its result.

        Raises:
            BridgeClosed: the loop is stopped.
        """
        if not self.alive and self._thread.ident is not None:
            coro.close()
            raise BridgeClosed(f"{self.name} is stopped")
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # loop closed between the check and the call
            coro.close()
            raise BridgeClosed(f"{self.name} is stopped") from None

    async def call(self, coro: Coroutine[Any, Any, Any], *, timeout: float) -> Any:
        """From trio: run ``coro`` on the asyncio loop and return its result.

        Raises:
            BridgeClosed: the loop is stopped. trio.TooSlowError: not done in ``timeout`` s
            (the coroutine is cancelled). Whatever the coroutine raised.
        """
        future = self.submit(coro)
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        try:
            with trio.fail_after(timeout):
                await done.wait()
        except BaseException:
            future.cancel()
            raise
        return future.result()

    def stop(self) -> None:
        """Ask the loop to stop (any thread); pending tasks are cancelled by the thread."""
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:
                pass

    async def join(self, timeout: float) -> bool:
        """Wait (from trio, without blocking it) until the thread ended; ``False`` if it is
        still running after ``timeout`` s (then it is abandoned: a daemon thread)."""
        with trio.move_on_after(timeout):
            while not self._stopped.is_set() and self._thread.is_alive():
                await trio.sleep(0.02)
            return True
        return False
