"""A proxy that lets nothing through: the peer's HTTP(S)_PROXY, so that whatever it tries to
fetch from the internet fails at once on this machine, and we know what it tried."""

from __future__ import annotations

import contextlib
import socket
import threading

from switchboard.embedded import free_port


class ProxyTrap:
    """Listens on 127.0.0.1; records the first line of each request (``CONNECT host:443
    HTTP/1.1`` for HTTPS, the full URL for HTTP), answers 403 and closes."""

    def __init__(self) -> None:
        self.port = free_port()
        self.attempts: list[str] = []
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", self.port))
        self._sock.settimeout(0.5)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="proxy-trap", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The proxy variables of a child process: everything off the loopback goes here."""
        out: dict[str, str] = {}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            out[name] = out[name.lower()] = self.url
        out["NO_PROXY"] = out["no_proxy"] = "127.0.0.1,localhost,::1"
        return out

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.attempts)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2.0)
                with contextlib.suppress(OSError):
                    head = conn.recv(4096).split(b"\r\n", 1)[0]
                    with self._lock:
                        self.attempts.append(head.decode("latin-1")[:200])
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self._stopped.set()
        self._sock.close()
        self._thread.join(5)
