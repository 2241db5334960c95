"""A TCP proxy in front of a real PostgreSQL that ends every connection at the client's n-th query message as a
server shutting down does: a FATAL 57P01 error, then the socket closes."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ["Proxy", "dropping_proxy"]

_QUERIES = {ord("Q"), ord("P")}  # simple query, or Parse of the extended protocol


def _fatal(message: str) -> bytes:
    fields = (
        b"".join(
            k + v.encode() + b"\0" for k, v in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", "57P01"), (b"M", message))
        )
        + b"\0"
    )
    return b"E" + struct.pack("!i", len(fields) + 4) + fields


def _upstream(params: dict) -> socket.socket:
    host, port = params.get("host") or "/tmp", int(params.get("port") or 5432)
    if host.startswith("/"):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(f"{host}/.s.PGSQL.{port}")
    else:
        sock = socket.create_connection((host, port))
    return sock


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_RDWR)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


class Proxy:
    """The URL through the proxy, and how many query messages its connections sent so far."""

    def __init__(self, url: str):
        self.url = url
        self.queries = 0


def _serve(client: socket.socket, params: dict, cut_at: int, proxy: Proxy) -> None:
    server = _upstream(params)
    threading.Thread(target=_pump, args=(server, client), daemon=True).start()
    queries = 0
    try:
        length = struct.unpack("!i", _read(client, 4))[0]  # the startup message has no type byte
        server.sendall(struct.pack("!i", length) + _read(client, length - 4))
        while True:
            head = _read(client, 5)
            body = _read(client, struct.unpack("!i", head[1:])[0] - 4)
            if head[0] in _QUERIES:
                queries += 1
                proxy.queries += 1
                if queries >= cut_at:  # the server shuts down while this query is on its way
                    client.sendall(_fatal("terminating connection due to administrator command"))
                    break
            server.sendall(head + body)
    except OSError:
        pass
    for sock in (client, server):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@contextlib.contextmanager
def dropping_proxy(url: str, cut_at: int, port: int = 0) -> Iterator[Proxy]:
    """A proxy on 127.0.0.1:`port` (0: any free one) to `url`'s server that ends each connection at its
    `cut_at`-th query."""
    params = conninfo_to_dict(url)
    listener = socket.create_server(("127.0.0.1", port))
    port = listener.getsockname()[1]
    proxy = Proxy(
        make_conninfo(
            **{**params, "host": "127.0.0.1", "port": str(port), "sslmode": "disable", "gssencmode": "disable"}
        )
    )

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                threading.Thread(target=_serve, args=(client, params, cut_at, proxy), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield proxy
    finally:
        listener.close()
