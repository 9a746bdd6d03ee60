"""A controller played by a test: a thread that calls `tick()` every 0.1 s while the `with` block runs,
and re-raises in the test what went wrong in it. Subclasses write what the real controller would write."""
from __future__ import annotations

import threading
import time
import traceback


class FakeController:
    def __init__(self):
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error and not exc[0]:
            raise self.error

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.tick()
            except BaseException as e:  # re-raised by __exit__; shown now too, since a test failing
                self.error = e           # inside the `with` block would hide it
                traceback.print_exc()
                return
            time.sleep(0.1)
