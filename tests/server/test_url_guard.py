"""Which addresses an http(s) image URL may reach by default: public unicast ones only, with
IPv4 addresses inside IPv6 ones judged as the IPv4 address (Python's ``is_global`` alone
takes multicast, ``::ffff:10.0.0.1``'s public twin, NAT64 and site-local ones wrongly)."""

from __future__ import annotations

import asyncio

import pytest

from app.server import url_guard

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",  # a public IPv4 address, mapped
    "64:ff9b::808:808",  # ... through NAT64
    "2002:808:808::1",  # a 6to4 tunnel to a public one
]
LOCAL = [
    "127.0.0.1",
    "127.255.255.254",
    "0.0.0.0",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "198.18.0.1",
    "192.0.2.1",
    "224.0.0.1",  # multicast, which is_global calls global
    "239.1.1.1",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd12:3456::1",
    "fec0::1",  # site-local (deprecated), which is_global calls global
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "::7f00:1",  # IPv4-compatible 127.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_public(address: str) -> None:
    assert url_guard.is_public(address)


@pytest.mark.parametrize("address", LOCAL)
def test_local_and_special_addresses_are_not(address: str) -> None:
    assert not url_guard.is_public(address)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "2130706433", "0x7f000001", "127.1"])
def test_a_host_resolving_to_a_local_address_is_refused(host: str) -> None:
    with pytest.raises(url_guard.LocalAddressError):
        asyncio.run(url_guard.resolve_public(host))


def test_every_address_of_a_name_must_be_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with one public and one local address is refused: the connection could go to
    either."""
    import socket

    def getaddrinfo(host: object, *_args: object, **_kwargs: object) -> object:
        stream = (socket.SOCK_STREAM, 6, "")
        return [
            (socket.AF_INET, *stream, ("8.8.8.8", 0)),
            (socket.AF_INET, *stream, ("10.0.0.1", 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(url_guard.LocalAddressError):
        asyncio.run(url_guard.resolve_public("mixed.invalid"))
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda *a, **k: getaddrinfo(*a, **k)[:1],  # type: ignore[index]
    )
    assert asyncio.run(url_guard.resolve_public("public.invalid")) == ["8.8.8.8"]


def test_a_name_not_found_is_unresolved(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def getaddrinfo(*_args: object, **_kwargs: object) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(url_guard.UnresolvedError):
        asyncio.run(url_guard.resolve_public("nothing.invalid"))
