"""Where outbound requests may go: one policy for probes, side requests and alert channels.

A base URL or a webhook URL is typed by staff and a hostname's DNS answer is the
provider's to choose, so every connection is checked at the address it actually opens:

* always refused (unless EGRESS_ALLOW names them): link-local and cloud-metadata
  addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, fd20:ce::254, 100.100.100.200,
  192.0.0.192), the local-use NAT64 prefix, the unspecified and multicast ranges — a
  request there reads the host's cloud credentials; an IPv6 form of an IPv4 address
  (mapped, compatible, NAT64, SIIT-translated, 6to4) is judged as that IPv4 address;
* allowed by default: loopback and private ranges (self-hosted servers live there, the
  demo runs on loopback), refused by listing them in EGRESS_DENY on stricter installs;
* EGRESS_ALLOW wins over both, for the one internal server a strict install probes.

Plain Python, no HTTP client: the Django side calls `configure()` from its settings
(probes/apps.py) and a URL field asks `url_refusal`; each connection is judged, at the
address it really opens, by the network backend in pinned.py, part of the one door out
(door.py).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Refused whatever EGRESS_DENY says; only EGRESS_ALLOW reopens one of them.
ALWAYS_REFUSED: tuple[tuple[str, str], ...] = (
    ("169.254.0.0/16", "link-local (cloud metadata at 169.254.169.254)"),
    ("fe80::/10", "link-local"),
    ("fd00:ec2::254/128", "cloud metadata (AWS IPv6)"),
    ("fd20:ce::254/128", "cloud metadata (GCP IPv6)"),
    ("100.100.100.200/32", "cloud metadata (Alibaba)"),
    ("192.0.0.192/32", "cloud metadata (Oracle)"),
    # RFC 8215's local-use NAT64 prefix: the network decides where in it the IPv4
    # address sits (/48 to /96), so which one a packet reaches cannot be told here.
    ("64:ff9b:1::/48", "local-use NAT64 (its IPv4 address cannot be told)"),
    ("0.0.0.0/8", "unspecified"),
    ("::/128", "unspecified"),
    ("224.0.0.0/4", "multicast"),
    ("ff00::/8", "multicast"),
    ("255.255.255.255/32", "broadcast"),
)
_ALWAYS = tuple((ipaddress.ip_network(cidr), why) for cidr, why in ALWAYS_REFUSED)


@dataclass(frozen=True)
class Policy:
    deny: tuple[Network, ...] = ()
    allow: tuple[Network, ...] = ()

    def refusal(self, address: str) -> str | None:
        """Why a connection to `address` (an IP literal) is refused, or None."""
        ip = _plain(ipaddress.ip_address(address.split("%", 1)[0]))
        if any(ip in net for net in self.allow):
            return None
        for net, why in _ALWAYS:
            if ip in net:
                return f"{ip} is {why}, always refused unless EGRESS_ALLOW names it"
        for net in self.deny:
            if ip in net:
                return f"{ip} is in {net}, refused by EGRESS_DENY"
        return None


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT's IPv4-translated ::ffff:0:a.b.c.d


def _plain(ip: Address) -> Address:
    """The IPv4 address an IPv6 form reaches, judged as such: ::ffff:169.254.169.254
    (mapped) is 169.254.169.254 to the kernel, ::169.254.169.254 (compatible) to older
    stacks, 64:ff9b::a9fe:a9fe to a NAT64 gateway and ::ffff:0:a9fe:a9fe to a SIIT
    translator, which forward it there, and 2002:a9fe:a9fe:: to a 6to4 relay, which
    tunnels it to that IPv4 address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _TRANSLATED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if 1 < int(ip) < 2**32:  # ::a.b.c.d, not :: or ::1 (IPv6's own)
        return ipaddress.IPv4Address(int(ip))
    return ip


def parse_networks(items: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs or addresses (`10.0.0.0/8`, `127.0.0.1`, `::1`); ValueError names a bad one."""
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or network") from None
    return tuple(networks)


_policy = Policy()
_lock = threading.Lock()


def configure(deny: Iterable[str] = (), allow: Iterable[str] = ()) -> Policy:
    """Install the process's policy (EGRESS_DENY, EGRESS_ALLOW); returns it."""
    global _policy
    with _lock:
        _policy = Policy(parse_networks(deny), parse_networks(allow))
        return _policy


def current() -> Policy:
    return _policy


def literal(host: str) -> str | None:
    """The address a host that is an IP literal names, in any spelling the resolver
    accepts (``169.254.169.254``, ``[::ffff:a9fe:a9fe]``, ``2852039166``, ``0xa9.254.0251.254``),
    or None for a name."""
    bare = host.strip("[]").split("%", 1)[0]
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if bare and all(c in "0123456789abcdefxABCDEFX." for c in bare):
        try:
            return socket.inet_ntoa(socket.inet_aton(bare))  # C's inet_aton: 1-4 parts, hex, octal
        except OSError:
            return None
    return None


# Names cloud providers answer their metadata service on, inside the instance: refused
# by name too, so a URL field names them and fails at once (their address is refused at
# every connection anyway).
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
    }
)


def url_refusal(url: str, policy: Policy | None = None) -> str | None:
    """Why the policy refuses `url` before any request (its host is a refused address or
    a metadata name), or None. A URL field's validation and every use ask this; a name is
    judged again by what it resolves to at each connection."""
    try:
        host = (urlsplit(url.strip()).hostname or "").lower().rstrip(".")
    except ValueError:
        return "not a URL"
    if host in METADATA_NAMES:
        return f"{host} is a cloud metadata service, always refused"
    address = literal(host)
    return (policy or current()).refusal(address) if address else None
