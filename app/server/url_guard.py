"""Which addresses an http(s) image URL may make the server connect to.

By default only public ones: a URL whose host is, or resolves to, an address on this computer
or a local network (loopback, private, link-local, shared 100.64/10, multicast, reserved,
unspecified, and IPv4 addresses inside IPv6 ones: ``::ffff:127.0.0.1``, 6to4, NAT64) is
refused. :func:`resolve_public` resolves the host once and returns the checked addresses, and
the caller connects to one of those, never to the name again (no DNS rebinding between the
check and the connection). Hosts as integers (``2130706433``, ``0x7f000001``, ``127.1``) mean
what the resolver makes of them, so they are checked as the address it answers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class LocalAddressError(Exception):
    """The host is or resolves to an address that is not public."""


class UnresolvedError(Exception):
    """The host name is not found."""


def is_public(address: str) -> bool:
    """Whether ``address`` (an IP address as text) is a public unicast address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        # an IPv4 address carried whole (mapped, NAT64, the old "compatible" form) is that
        # address; one inside a tunnel's address (6to4, Teredo) must be public too
        if ip.ipv4_mapped is not None:
            return is_public(str(ip.ipv4_mapped))
        if ip in _NAT64 or ip in _IPV4_COMPATIBLE:
            return is_public(str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
        inner = ip.sixtofour or (ip.teredo[1] if ip.teredo is not None else None)
        if (inner is not None and not is_public(str(inner))) or ip.is_site_local:
            return False
    return (
        ip.is_global
        and not ip.is_multicast
        and not ip.is_reserved
        and not ip.is_unspecified
        and not ip.is_loopback
        and not ip.is_link_local
        and not ip.is_private
    )


async def resolve_public(host: str) -> list[str]:
    """Every address ``host`` resolves to (once), in the resolver's order, all public; raises
    LocalAddressError if any is not, UnresolvedError if there is none."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UnresolvedError(str(e)) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise UnresolvedError("no address")
    if not all(is_public(a) for a in addresses):
        raise LocalAddressError(host)
    return addresses
