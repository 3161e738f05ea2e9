"""SIGTERM and SIGINT during a run: the run ends as interrupted, however many come and whenever.

CI runners and ``timeout -k`` send SIGTERM more than once; Ctrl-C may be pressed twice. A
second KeyboardInterrupt raised while pytest handles the first (or while the reports are
written) would skip the code that records the interruption: run.json would say the run
finished uninterrupted and the page PASS. So only the first signal raises, and only where the
run can be stopped (from collection until the session ends: ``armed``); every signal is
counted, and one that comes while the run is set up or its reports written is acted on
there (:attr:`count`): the plugin raises it at collection, or writes the reports again as
interrupted (suite/plugin.py).
"""

from __future__ import annotations

import os
import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stop:
    def __init__(self):
        self.count = 0          # SIGTERM/SIGINT received so far
        self.armed = False      # the first one raises KeyboardInterrupt (else it is only counted)
        self._raised = False
        self._first: int | None = None
        self._old: dict = {}

    def install(self) -> "Stop":
        if threading.current_thread() is threading.main_thread():   # (signal handlers: main thread only)
            for s in SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame):
        self.count += 1
        self._first = self._first or signum
        if self.armed and not self._raised:
            self._raised = True
            raise KeyboardInterrupt(signal.Signals(signum).name)
        # (os.write: a print here could re-enter a buffered write the signal interrupted)
        os.write(2, f"\nqconform: {signal.Signals(signum).name}: stopping; the report of what ran is being "
                    f"written (kill -9 stops at once)\n".encode())

    def raise_pending(self) -> None:
        """Arm; a signal that came while disarmed (the run's set-up) stops the run now."""
        self.armed = True
        if self.count and not self._raised:
            self._raised = True
            raise KeyboardInterrupt("a signal during the run's set-up")

    def restore(self) -> None:
        self.armed = False
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}

    def release(self) -> None:
        """Restore the handlers; a signal held meanwhile is delivered to them now (not a
        conformance run: pytest does with it what it always does)."""
        self.restore()
        if self._first is not None:
            signal.raise_signal(self._first)
