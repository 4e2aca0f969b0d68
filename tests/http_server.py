"""A real loopback HTTP server for adapter tests: scripted replies, recorded requests.

Adapters are tested against actual sockets (not a mocked transport) so that timeouts, refused
connections, dropped connections and truncated bodies go through httpx exactly as in
production. Each test queues the replies it wants; the server answers requests in order and
records what it received, so tests can assert the exact wire shape.
"""

from __future__ import annotations

import json
import queue
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FILLER = b" " * 65536


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # the parsed JSON, or None when the body was not JSON


@dataclass
class Reply:
    """One scripted answer.

    ``delay_s`` holds the reply back (to force a client timeout); ``drop`` closes the
    connection without answering ("Server disconnected without sending a response");
    ``content_length`` overrides the header to announce more bytes than are sent.

    Misbehaviour on demand: ``respond`` builds the reply from the request received (a server
    that echoes the credential it was sent, in an answer or an error); ``filler_bytes``
    appends that many spaces after the body, written in 64 KiB pieces so a huge body never
    sits in this process's memory (JSON allows trailing whitespace, so the body stays valid);
    ``announce_length=False`` sends no Content-Length and ends the body by closing the
    connection.
    """

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    content_length: int | None = None
    respond: Callable[[Received], Reply] | None = None
    filler_bytes: int = 0
    announce_length: bool = True

    @classmethod
    def json(cls, status: int, payload: Any, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, body=json.dumps(payload).encode(), headers=headers or {})


class _CountingHTTPServer(ThreadingHTTPServer):
    """Counts the TCP connections it accepts. Python's default listen backlog (5) would drop
    connections opened together and make clients retry; real servers queue far more."""

    request_queue_size = 1024
    # Handler threads must never keep the test process alive.
    daemon_threads = True
    connections = 0
    tls: ssl.SSLContext | None = None

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1  # the accept loop runs on one thread
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # On the handler's thread: a slow or failed TLS handshake never stalls the accept loop.
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # e.g. a client that does not trust the certificate
        super().finish_request(request, client_address)


class LoopbackServer:
    """Threaded HTTP server on 127.0.0.1 with an OS-chosen port; HTTPS with ``tls`` (a server
    context, e.g. ``LoopbackCertificate.server_context()``)."""

    def __init__(self, tls: ssl.SSLContext | None = None, port: int = 0) -> None:
        self.replies: queue.Queue[Reply] = queue.Queue()
        # When set, answers every request (instead of the queue), e.g. a server that serves
        # many processes and counts what each request body cost.
        self.respond: Callable[[Received], Reply] | None = None
        self.requests: list[Received] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        # ``port``: a server restarted where the last one listened (0: one the OS chooses).
        self._httpd = _CountingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._httpd.tls = tls
        self._thread = threading.Thread(target=self._serve, name="loopback-http", daemon=True)
        self._serving = threading.Event()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self._httpd.tls else 'http'}://{host}:{port}"

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._httpd.connections

    def add(self, *replies: Reply) -> None:
        for reply in replies:
            self.replies.put(reply)

    def start(self) -> None:
        self._thread.start()
        # The socket already listens (bound in the constructor); this waits until the accept
        # loop runs, so the first request is answered without relying on the backlog.
        self._serving.wait()

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers parked in a delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _serve(self) -> None:
        self._serving.set()
        self._httpd.serve_forever(poll_interval=0.05)

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real APIs
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                self._handle()

            def do_GET(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:  # OpenAI's files (tests/batch_servers.py)
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                received = Received(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw=raw,
                    body=body,
                )
                server._record(received)
                try:
                    reply = (
                        server.respond(received)
                        if server.respond is not None
                        else server.replies.get_nowait()
                    )
                except queue.Empty:
                    reply = Reply.json(599, {"error": {"message": "no scripted reply left"}})
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    self.close_connection = True
                    return
                if reply.drop:
                    self.close_connection = True
                    return
                self._send(reply.respond(received) if reply.respond else reply)

            def _send(self, reply: Reply) -> None:
                body = reply.body
                length = len(body) + reply.filler_bytes
                if reply.content_length is not None:
                    length = reply.content_length
                head = [f"HTTP/1.1 {reply.status} Scripted"]
                headers = {"Content-Type": "application/json", **reply.headers}
                head += [f"{name}: {value}" for name, value in headers.items()]
                if reply.announce_length:
                    head.append(f"Content-Length: {length}")
                if reply.content_length is not None or not reply.announce_length:
                    # The body ends where the connection does (or the announced length is a
                    # lie and the client must see a short body).
                    head.append("Connection: close")
                    self.close_connection = True
                data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
                try:
                    # One write: status line, headers and body leave in a single segment.
                    self.wfile.write(data)
                    left = reply.filler_bytes
                    while left > 0 and not server._stopping.is_set():
                        piece = min(left, len(FILLER))
                        self.wfile.write(FILLER[:piece])
                        left -= piece
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True  # the client gave up (e.g. its timeout)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # keep test output clean

        return Handler


@contextmanager
def running_server(tls: ssl.SSLContext | None = None) -> Iterator[LoopbackServer]:
    server = LoopbackServer(tls)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def refused_url() -> Iterator[str]:
    """A URL whose port is bound but not listening: connecting is refused at once, and no
    other process can take the port while the socket is held."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@dataclass(frozen=True)
class LoopbackCertificate:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files), made for the test."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context

    def client_context(self) -> ssl.SSLContext:
        """Trusts this certificate alone, with verification on (as a client's default)."""
        return ssl.create_default_context(cafile=str(self.cert))


@contextmanager
def loopback_certificate() -> Iterator[LoopbackCertificate | None]:
    """A new ``LoopbackCertificate`` in a folder removed afterwards, made with the
    cryptography package when it is installed, else with the openssl command; None when
    neither is there."""
    with tempfile.TemporaryDirectory() as folder:
        cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        try:
            _certificate_with_cryptography(cert, key)
        except ImportError:
            openssl = shutil.which("openssl")
            if openssl is None:
                yield None
                return
            subprocess.run(
                [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                check=True, capture_output=True,
            )  # fmt: skip
        yield LoopbackCertificate(cert, key)


def _certificate_with_cryptography(cert: Path, key: Path) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        # Python 3.13's strict verification wants the key identifiers.
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(private.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(private.public_key()), False
        )
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
