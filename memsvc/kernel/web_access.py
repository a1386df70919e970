"""Which `Host` and `Origin` a request on the REST port may carry: the one rule that the
request guard (Envoy's Lua filter, in front of REST and /mcp) enforces and that the MCP
HTTP server repeats for a caller that reaches its loopback port directly.

Why: a tokenless server on loopback is reachable by any web page the user opens. A page on
another origin is told apart by its `Origin` (browsers send it on every cross-origin POST);
a DNS-rebinding page (its own name pointed at 127.0.0.1) sends its own origin, but also its
own name in `Host`, which a loopback server never has. So on a loopback bind the Host must
name loopback (or a name the operator added, such as a reverse proxy's), and everywhere an
Origin, when present, must be the request's own (same host and port) or one the operator
listed. A public bind needs tokens, which no web page holds, so there any Host name is
accepted unless the operator lists the names.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass


def is_loopback(host: str) -> bool:
    """Whether a host name or address reaches only this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# The names loopback is reached by, as a Host header writes them (IPv6 in brackets).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_NAME = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$")
_ORIGIN = re.compile(r"^(https?)://([^/:?#@\[\]]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$")


@dataclass(frozen=True)
class WebAccess:
    """`hosts`: the names (lowercase, no port) a request's Host may carry, with any port;
    None when any name is accepted. `origins`: the origins (`scheme://host[:port]`,
    lowercase) accepted besides the request's own."""

    hosts: tuple[str, ...] | None
    origins: tuple[str, ...]


def host_name(text: str) -> str:
    """An operator's extra host name, as a Host header carries it (lowercase, IPv6 in
    brackets); ValueError saying what is wrong (a port, a scheme, a path, userinfo)."""
    name = text.strip().lower()
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        if not _NAME.match(name):
            raise ValueError(
                f"allowed host {text!r} must be a host name or an IP address, without a port or scheme"
            ) from None
        return name
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def origin(text: str) -> str:
    """An operator's extra origin, as browsers send it (`https://app.example.com`,
    `http://127.0.0.1:3000`); ValueError when it is anything else (a path, userinfo)."""
    value = text.strip().lower().rstrip("/")
    match = _ORIGIN.match(value)
    if not match:
        raise ValueError(f"allowed origin {text!r} must be scheme://host[:port] with http or https, nothing after it")
    name = host_name(match.group(2))
    port = match.group(3)
    if port is not None and not 1 <= int(port) <= 65535:
        raise ValueError(f"allowed origin {text!r}: the port must be 1..65535")
    return f"{match.group(1)}://{name}" + (f":{port}" if port else "")


def web_access(rest_host: str, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = ()) -> WebAccess:
    """The rule for a REST port bound to `rest_host` (MEMSVC_REST_HOST) with the operator's
    MEMSVC_ALLOWED_HOSTS and MEMSVC_ALLOWED_ORIGINS: on loopback, the loopback names and the
    extra ones; on a public address, any name unless extra ones are listed (then those, the
    loopback names and the bound address itself)."""
    extra = [host_name(h) for h in extra_hosts]
    origins = tuple(dict.fromkeys(origin(o) for o in extra_origins))
    if not is_loopback(rest_host) and not extra:
        return WebAccess(None, origins)
    names = list(LOOPBACK_NAMES)
    try:
        bound = ipaddress.ip_address(rest_host.strip("[]"))
    except ValueError:
        bound = None
    if rest_host.strip() and not (bound is not None and bound.is_unspecified):
        names.append(host_name(rest_host))
    return WebAccess(tuple(dict.fromkeys(names + extra)), origins)
