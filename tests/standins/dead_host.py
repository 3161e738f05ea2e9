"""STAND-IN for a dead ssh device: a loopback port that takes TCP connections and counts them.

``close`` mode accepts and closes at once (what a host whose sshd is gone, behind a port
forwarder, looks like: ssh fails with "Connection closed"); ``silent`` mode accepts and never
says a word (a hung host: ssh waits for the banner until its ConnectTimeout). Either way
``accepts`` is the number of connection attempts the client made, which is what the tests
assert on (not the time). ``stop()`` closes the listener and every connection it holds.
"""

from __future__ import annotations

import socket
import threading


class DeadHost:
    def __init__(self, mode: str = "close"):
        assert mode in ("close", "silent")
        self.mode = mode
        self.accepts = 0
        self._held: list[socket.socket] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="dead-host", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:   # stopped
                return
            self.accepts += 1
            if self.mode == "close":
                conn.close()
            else:
                self._held.append(conn)

    def stop(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=5)
        for c in self._held:
            c.close()
