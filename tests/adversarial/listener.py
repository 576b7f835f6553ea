"""A TCP port on 127.0.0.1 that records every connection: where the network attack aims."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A TCP port on 127.0.0.1 that records every connection made to it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections: list[bytes] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    self.connections.append(connection.recv(100))
                except OSError:
                    self.connections.append(b"")
