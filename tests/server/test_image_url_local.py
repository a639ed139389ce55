"""http(s) image URLs may not reach this computer or the local network unless the server's
owner opts in (``image_urls_local``, `ember serve --image-urls-local`): the real server
(uvicorn on 127.0.0.1) and the `openai` SDK, with a picture server on 127.0.0.1 and one on
::1 that count what reaches them.

Proves: loopback (127.0.0.1, [::1], ::ffff:127.0.0.1, "localhost", an integer host), cloud
metadata (169.254.169.254) and private (10.0.0.1) addresses are a 400 ``image_url_not_allowed``
naming the part, and nothing connects; a redirect from an allowed address to a local one is
refused the same way; the name is resolved once and the connection made to the checked
address, the name kept in the Host header; with the opt-in the picture server answers. The
server answers the next request every time. The engine is the scripted model.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server import url_guard
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.images import image_messages, png
from tests.helpers.served import serving

MODEL = "scripted"
PICTURE = png(32, 24)


class Pictures(BaseHTTPRequestHandler):
    """/cat.png is a picture; /to/URL redirects to URL. Every request is recorded."""

    seen: list[tuple[str, str]]  # (path, Host header), set per server

    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Host", "")))
        if self.path.startswith("/to/"):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/to/"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PICTURE)))
        self.end_headers()
        self.wfile.write(PICTURE)


class Site:
    def __init__(self, family: socket.AddressFamily, host: str) -> None:
        seen: list[tuple[str, str]] = []
        handler = type("Handler", (Pictures,), {"seen": seen})
        server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family})
        self.server = server_class((host, 0), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.seen = seen
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def v4() -> Iterator[Site]:
    site = Site(socket.AF_INET, "127.0.0.1")
    yield site
    site.close()


@pytest.fixture(scope="module")
def v6() -> Iterator[Site]:
    site = Site(socket.AF_INET6, "::1")
    yield site
    site.close()


def serve(gemma_path: Path, config: ServerConfig) -> Iterator[openai.OpenAI]:
    from tests.helpers.scripted_model import scripted_factory

    worker = EngineWorker(model_factory=scripted_factory())
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL)]))
    gateway.load("scripted", MODEL, LoadParams(n_ctx=4096)).wait(30)
    with (
        serving(gateway, config) as runner,
        openai.OpenAI(base_url=runner.base_url, api_key="x", max_retries=0) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def public_only(gemma_path: Path) -> Iterator[openai.OpenAI]:
    yield from serve(gemma_path, ServerConfig(port=0, image_urls=True))


@pytest.fixture(scope="module")
def local_too(gemma_path: Path) -> Iterator[openai.OpenAI]:
    yield from serve(gemma_path, ServerConfig(port=0, image_urls=True, image_urls_local=True))


def failure(client: openai.OpenAI, url: str) -> dict[str, Any]:
    """The 400's body for a request linking ``url``; the server answers the next request."""
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=image_messages(url), max_tokens=2)
    body = caught.value.body
    assert isinstance(body, dict)
    if body["code"] != "model_not_vision":  # which comes after the image arrived
        assert body["param"] == "messages[0].content"
        assert "messages[0].content[1].image_url" in body["message"]
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert answer.choices[0].message is not None
    return body


def local_urls(v4: Site, v6: Site) -> dict[str, tuple[str, Site | None]]:
    return {
        "127.0.0.1": (f"http://127.0.0.1:{v4.port}/cat.png", v4),
        "[::1]": (f"http://[::1]:{v6.port}/cat.png", v6),
        "::ffff:127.0.0.1": (f"http://[::ffff:127.0.0.1]:{v4.port}/cat.png", v4),
        "localhost": (f"http://localhost:{v4.port}/cat.png", v4),
        "an integer host": (f"http://2130706433:{v4.port}/cat.png", v4),
        "a hex integer host": (f"http://0x7f000001:{v4.port}/cat.png", v4),
        "a short dotted host": (f"http://127.1:{v4.port}/cat.png", v4),
        "cloud metadata": ("http://169.254.169.254/latest/meta-data/", None),
        "a private address": ("http://10.0.0.1/cat.png", None),
        "shared address space": ("http://100.64.0.1/cat.png", None),
        "unspecified": (f"http://0.0.0.0:{v4.port}/cat.png", v4),
    }


CASES = [
    "127.0.0.1",
    "[::1]",
    "::ffff:127.0.0.1",
    "localhost",
    "an integer host",
    "a hex integer host",
    "a short dotted host",
    "cloud metadata",
    "a private address",
    "shared address space",
    "unspecified",
]


@pytest.mark.parametrize("case", CASES)
def test_a_local_address_is_refused_and_nothing_connects(
    public_only: openai.OpenAI, v4: Site, v6: Site, case: str
) -> None:
    url, site = local_urls(v4, v6)[case]
    before = len(site.seen) if site else 0
    body = failure(public_only, url)
    assert body["code"] == "image_url_not_allowed", body
    assert "local network" in body["message"] and "--image-urls-local" in body["message"]
    if site is not None:
        assert len(site.seen) == before  # refused before connecting


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/", "http://[::1]:{v6}/cat.png"])
def test_a_redirect_to_a_local_address_is_refused(
    public_only: openai.OpenAI, v4: Site, v6: Site, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    real = url_guard.is_public
    monkeypatch.setattr(url_guard, "is_public", lambda a: a == "127.0.0.1" or real(a))
    hop = target.format(v6=v6.port)
    before4, before6 = len(v4.seen), len(v6.seen)
    body = failure(public_only, f"http://127.0.0.1:{v4.port}/to/{hop}")
    assert body["code"] == "image_url_not_allowed", body
    assert v4.seen[before4:] == [(f"/to/{hop}", f"127.0.0.1:{v4.port}")]  # the first hop only
    assert len(v6.seen) == before6


def test_the_name_is_resolved_once_and_the_checked_address_connected_to(
    public_only: openai.OpenAI, v4: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that answers another address the second time it is asked (DNS rebinding;
    127.0.0.2 here, where nothing listens) is asked once: the connection goes to the address
    that was checked, with the name in the Host header."""
    real_getaddrinfo = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name == "pictures.rebind.invalid":
            asked.append(name)
            host = "127.0.0.1" if len(asked) == 1 else "127.0.0.2"
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    real = url_guard.is_public
    monkeypatch.setattr(url_guard, "is_public", lambda a: a == "127.0.0.1" or real(a))
    before = len(v4.seen)
    # the scripted model has no projector: the picture arrived when the model is what is refused
    body = failure(public_only, f"http://pictures.rebind.invalid:{v4.port}/cat.png")
    assert body["code"] == "model_not_vision", body
    assert asked == ["pictures.rebind.invalid"]
    assert v4.seen[before:] == [("/cat.png", f"pictures.rebind.invalid:{v4.port}")]


@pytest.mark.parametrize("case", ["127.0.0.1", "[::1]", "localhost", "an integer host"])
def test_with_the_opt_in_the_local_picture_server_answers(
    local_too: openai.OpenAI, v4: Site, v6: Site, case: str
) -> None:
    url, site = local_urls(v4, v6)[case]
    assert site is not None
    before = len(site.seen)
    body = failure(local_too, url)
    assert body["code"] == "model_not_vision", body  # fetched; the scripted model has no eyes
    assert len(site.seen) == before + 1


def tls_site(tmp_path: Path, name: str) -> tuple[Site, Path]:
    """A picture server on 127.0.0.1 speaking TLS with a self-signed certificate for ``name``;
    the certificate's file, to trust it."""
    import datetime
    import ssl

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    site = Site(socket.AF_INET, "127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    site.server.socket = context.wrap_socket(site.server.socket, server_side=True)
    return site, cert_file


@pytest.mark.parametrize("certified", ["pictures.tls.invalid", "someone-else.invalid"])
def test_https_checks_the_certificate_against_the_name_not_the_address(
    public_only: openai.OpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, certified: str
) -> None:
    """The connection goes to the checked address, and TLS still names the host: a
    certificate for the name is accepted, one for another name is not."""
    site, cert_file = tls_site(tmp_path, certified)
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        return real_getaddrinfo("127.0.0.1" if "invalid" in name else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    real = url_guard.is_public
    monkeypatch.setattr(url_guard, "is_public", lambda a: a == "127.0.0.1" or real(a))
    try:
        body = failure(public_only, f"https://pictures.tls.invalid:{site.port}/cat.png")
    finally:
        site.close()
    if certified == "pictures.tls.invalid":
        assert body["code"] == "model_not_vision", body  # fetched over TLS
        assert site.seen == [("/cat.png", f"pictures.tls.invalid:{site.port}")]
    else:
        assert body["code"] == "image_url_fetch_failed", body
        assert "CERTIFICATE_VERIFY_FAILED" in body["message"] and not site.seen


def test_a_name_not_found_is_a_400(
    public_only: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "nothing.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    body = failure(public_only, "http://nothing.invalid/cat.png")
    assert body["code"] == "image_url_fetch_failed", body
    assert "its host name was not found" in body["message"]
