"""Which remote endpoints memsvc will call (ENGINE.md §3 URL policy).

A settings write can make the server send requests, with credentials, to any URL; without
these rules that is a server-side request forgery into cloud metadata services. The static
checks run on write; `check_resolved` runs on every use, after DNS, so a name that later
resolves to a forbidden address is still refused.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
METADATA_ADDRESSES = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"),
                      ipaddress.ip_network("fd00:ec2::254/128"))


def forbidden_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in METADATA_ADDRESSES)


def check_url(url: str) -> str | None:
    """None when acceptable, else why not. Never echoes the URL (it may hold a secret)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must use http or https"
    if not host:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials (user:password@)"
    if parts.query or url.rstrip().endswith("?"):
        return "must not contain a query string"
    if parts.fragment:
        return "must not contain a fragment"
    if host.lower().rstrip(".") in METADATA_HOSTS or forbidden_address(host):
        return "must not point at a link-local or cloud metadata address"
    return None


def check_resolved(url: str, *, unresolvable_ok: bool = False) -> str | None:
    """`check_url` plus every address the host resolves to; for use right before a call.
    A settings write passes `unresolvable_ok`: a name that does not resolve now may later,
    and is checked again on every use."""
    problem = check_url(url)
    if problem:
        return problem
    parts = urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError:
        return None if unresolvable_ok else "host does not resolve"
    if any(forbidden_address(info[4][0]) for info in infos):
        return "resolves to a link-local or cloud metadata address"
    return None
