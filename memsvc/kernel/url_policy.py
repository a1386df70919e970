"""Which remote endpoints memsvc will call.

A settings write can make the server send requests, with credentials, to any URL; without
these rules that is a server-side request forgery into cloud metadata services. The rules:
http(s) only, no user:password, no query string or fragment, and never a link-local,
unspecified or cloud metadata address, in any spelling, before or after DNS.

Two layers, so that what is checked is exactly what is used:

- `check_url` (static, on every settings write and before every call) parses the URL with
  the HTTP client's own parser (httpx.URL) and refuses what that client cannot use as
  written: a host the resolver would reject (a DNS label over 63 characters, an empty label,
  a character outside letters, digits, '-' and '_'), and every ambiguous spelling of an IPv4
  address (octal `0177.0.0.1`, hex `0x7f.1`, short `127.1`, integer `2130706433`, leading
  zeros `1.2.3.04`) — the C resolver reads those as some address, httpx refuses some of
  them, and a check that reads them differently from the connection is no check.
- `checked_addresses` (at connect time) resolves a host once and refuses it when any
  address is forbidden; the connection is then made to one of those very addresses
  (memsvc.outbound), so a name cannot resolve to an allowed address for the check and to a
  metadata address for the connection (DNS rebinding).

IPv6 spellings of an IPv4 address are read as that address: IPv4-mapped (`::ffff:a.b.c.d`),
IPv4-compatible (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`,
`64:ff9b:1::/48`), 6to4 (`2002::/16`) and Teredo (`2001::/32`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: (host, port) → the addresses it resolves to, as strings; the default asks the system.
Resolver = Callable[[str, int], list[str]]

#: Names of instance-metadata services (and any name under them).
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",  # Google Cloud
        "instance-data",
        "instance-data.ec2.internal",  # AWS
        "metadata.tencentyun.com",  # Tencent Cloud
    }
)
METADATA_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # link-local: AWS, GCP, Azure, OCI, DigitalOcean, OpenStack metadata (.169.254)
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "168.63.129.16/32",  # Azure WireServer / host agent
        "192.0.0.192/32",  # Oracle Cloud (classic) metadata
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::/64",  # AWS instance services over IPv6 (metadata ::254, DNS ::253, time ::123)
    )
)
UNSPECIFIED_NETWORKS = (ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("::/128"))
_EMBEDDING_LOW_32 = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated, still parsed by stacks)
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT)
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # NAT64 local-use prefix
    )
)

METADATA_PROBLEM = "must not point at a link-local or cloud metadata address"
UNSPECIFIED_PROBLEM = "must not point at an unspecified address (0.0.0.0 or ::)"
AMBIGUOUS_IPV4 = "must write an IPv4 address as four decimal numbers without leading zeros"
#: The same refusals, said of a name after DNS.
RESOLVED_PROBLEMS = {
    METADATA_PROBLEM: "resolves to a link-local or cloud metadata address",
    UNSPECIFIED_PROBLEM: "resolves to an unspecified address (0.0.0.0 or ::)",
}
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0[xX][0-9A-Fa-f]*)$")
_CANONICAL_IPV4 = re.compile(
    r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
)
_WHITESPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_MAX_HOST = 253


class URLRefused(Exception):
    """The URL policy refused an endpoint at connect time; `problem` says why (never the URL)."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


class Unresolvable(Exception):
    """The host does not resolve (now): not a policy refusal; a connection fails as any
    connection to an unknown name does."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the system's order, without repeats."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries in one of the transition formats."""
    out = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip.teredo is not None:
        out.extend(ip.teredo)
    if any(ip in net for net in _EMBEDDING_LOW_32):
        out.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return out


def address_problem(ip: IPAddress) -> str | None:
    """Why a connection to `ip` is refused, or None."""
    candidates: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        candidates.extend(embedded_ipv4(ip))
    if any(c in net for c in candidates for net in METADATA_NETWORKS if c.version == net.version):
        return METADATA_PROBLEM
    mapped = [ip] + ([ip.ipv4_mapped] if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else [])
    if any(c in net for c in mapped for net in UNSPECIFIED_NETWORKS if c.version == net.version):
        return UNSPECIFIED_PROBLEM
    return None


def host_problem(host: str) -> str | None:
    """Why a host (as the HTTP client will send it to the resolver: IDNA-encoded, IPv6
    without brackets) is refused, or None."""
    if ":" in host:
        if "%" in host:
            return "must not use an IPv6 zone id"
        try:
            return address_problem(ipaddress.IPv6Address(host))
        except ValueError:
            return "is not a valid URL (bad IPv6 address)"
    name = host.removesuffix(".")
    labels = name.split(".")
    if _NUMERIC_LABEL.match(labels[-1]):
        if not _CANONICAL_IPV4.match(host):
            return AMBIGUOUS_IPV4
        return address_problem(ipaddress.IPv4Address(host))
    if len(name) > _MAX_HOST:
        return f"must have a host name of at most {_MAX_HOST} characters"
    if not all(_LABEL.match(label) for label in labels):
        return "must have a host name made of dot-separated labels of 1 to 63 letters, digits, '-' or '_'"
    lowered = name.lower()
    if any(lowered == n or lowered.endswith("." + n) for n in METADATA_HOSTS):
        return METADATA_PROBLEM
    return None


def parse(url: str) -> tuple[httpx.URL | None, str | None]:
    """(the URL as the HTTP client reads it, None) when acceptable, else (None, why not).
    Never echoes the URL (it may hold a secret)."""
    if not isinstance(url, str) or _WHITESPACE_OR_CONTROL.search(url):
        return None, "must not contain spaces or control characters"
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError, TypeError):
        return None, _unparsable(url)
    if parsed.scheme not in ("http", "https"):
        return None, "must use http or https"
    if not parsed.raw_host:
        return None, "must name a host"
    if parsed.userinfo:
        return None, "must not contain credentials (user:password@)"
    if parsed.query or "?" in url:
        return None, "must not contain a query string"
    if parsed.fragment or "#" in url:
        return None, "must not contain a fragment"
    if port is not None and not 1 <= port <= 65535:
        return None, "must use a port from 1 to 65535"
    problem = host_problem(parsed.raw_host.decode("ascii"))
    return (None, problem) if problem else (parsed, None)


def _unparsable(url: str) -> str:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    labels = host.rstrip(".").split(".")
    if host and ":" not in host and _NUMERIC_LABEL.match(labels[-1]):
        return AMBIGUOUS_IPV4
    return "is not a valid URL"


def check_url(url: str) -> str | None:
    """None when acceptable, else why not (static: no DNS). Never echoes the URL."""
    return parse(url)[1]


def checked_addresses(host: str, port: int, resolver: Resolver | None = None) -> list[str]:
    """Resolve `host` once; every address it resolves to, when none is forbidden. Raises
    URLRefused (the host or one of its addresses is forbidden) or Unresolvable."""
    problem = host_problem(host)
    if problem:
        raise URLRefused(problem)
    try:
        ipaddress.ip_address(host)
        addresses = [host]  # an IP literal is its own, only, address: nothing to resolve
    except ValueError:
        try:
            addresses = (resolver or system_resolver)(host, port)
        except (OSError, UnicodeError, ValueError):
            raise Unresolvable(host) from None
    if not addresses:
        raise Unresolvable(host)
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            raise URLRefused("host resolves to something that is not an IP address") from None
        problem = address_problem(ip)
        if problem:
            raise URLRefused(RESOLVED_PROBLEMS[problem])
    return addresses


def check_resolved(url: str, *, unresolvable_ok: bool = False, resolver: Resolver | None = None) -> str | None:
    """`check_url` plus every address the host resolves to (for a settings write: the
    connection checks again, on the addresses it connects to). `unresolvable_ok`: a name
    that does not resolve now may later, and is checked on every use."""
    parsed, problem = parse(url)
    if parsed is None:
        return problem
    try:
        checked_addresses(parsed.raw_host.decode("ascii"), parsed.port or _default_port(parsed.scheme), resolver)
    except URLRefused as exc:
        return exc.problem
    except Unresolvable:
        return None if unresolvable_ok else "names a host that does not resolve"
    return None


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def host_of(url: str) -> str:
    """The host alone (never the path, which can carry a token), for messages and logs."""
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


def join(base_url: str, path: str) -> str:
    """`base_url` and `path` with exactly one slash between them."""
    return base_url.rstrip("/") + "/" + path.lstrip("/")
