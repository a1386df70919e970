"""The one way the embedding layer calls a remote endpoint: the static URL policy before the
call and the after-DNS one on the very address connected to (memsvc.outbound), bearer
credentials when given, no redirects, no proxy or .netrc from the environment, and errors
that say what went wrong without the URL, the key or the body.

Every failure of the call path is a CallFailed, whatever raised it (the HTTP client raises
more than httpx.HTTPError: InvalidURL, UnicodeError from the IDNA codec, OSError...): a
remote endpoint is a dependency that may fail in any way, and its callers fall back on
CallFailed (a write marks its rows for reindexing, a retrieval falls back to keywords, a
rerank keeps the order), so nothing else may escape."""

from __future__ import annotations

import json
from typing import Any

import httpx

from memsvc import outbound
from memsvc.kernel.url_policy import Resolver, check_url, host_of


class CallFailed(Exception):
    """A sanitized description of a failed call; callers wrap it in their own error class."""

    def __init__(self, message: str, *, refused: str | None = None, status: int | None = None):
        super().__init__(message)
        self.refused = refused
        self.status = status


def make_client(timeout_s: float, resolver: Resolver | None = None) -> httpx.Client:
    """A client that never follows redirects, ignores proxy variables and ~/.netrc, and
    connects only to addresses the URL policy accepted (see memsvc.outbound)."""
    return outbound.make_client(timeout_s, resolver)


def post_json(
    client: httpx.Client, url: str, body: dict[str, Any], api_key: str | None, timeout_s: float | None = None
) -> Any:
    """POST `body` as JSON, return the decoded JSON answer, or raise CallFailed."""
    problem = check_url(url)
    if problem:
        raise CallFailed(f"the endpoint {problem}", refused=problem)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    kwargs: dict[str, Any] = {}
    if timeout_s is not None:
        kwargs["timeout"] = httpx.Timeout(timeout_s)
    host = host_of(url)
    try:
        response = client.post(url, content=json.dumps(body).encode("utf-8"), headers=headers, **kwargs)
    except outbound.URLRefused as exc:
        raise CallFailed(f"the endpoint {exc.problem}", refused=exc.problem) from None
    except httpx.TimeoutException:
        raise CallFailed(f"{host} did not answer in time") from None
    except httpx.HTTPError as exc:
        raise CallFailed(f"could not reach {host} ({type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 - see the module docstring: nothing else may escape
        raise CallFailed(f"could not call {host} ({type(exc).__name__})") from None
    if response.status_code in (401, 403):
        raise CallFailed(f"{host} refused the credentials (HTTP {response.status_code})", status=response.status_code)
    if response.is_redirect:
        raise CallFailed(
            f"{host} answered with a redirect (HTTP {response.status_code}); redirects are not followed",
            status=response.status_code,
        )
    if response.status_code != 200:
        raise CallFailed(f"{host} answered HTTP {response.status_code}", status=response.status_code)
    try:
        return response.json()
    except ValueError:
        raise CallFailed(f"{host} answered with something that is not JSON") from None
