"""The one way the embedding layer calls a remote endpoint: URL policy after DNS right before
the call, bearer credentials when given, no redirects, no proxy or .netrc from the
environment, and errors that say what went wrong without the URL, the key or the body."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from memsvc.core.url_policy import check_resolved


class CallFailed(Exception):
    """A sanitized description of a failed call; callers wrap it in their own error class."""

    def __init__(self, message: str, *, refused: str | None = None, status: int | None = None):
        super().__init__(message)
        self.refused = refused
        self.status = status


def host_of(url: str) -> str:
    """The host alone (never the path, which can carry a token), for messages and logs."""
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


def join(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def make_client(timeout_s: float) -> httpx.Client:
    # trust_env=False: no proxy variables and no ~/.netrc credentials (which httpx would
    # otherwise attach to whatever host a settings write points us at).
    return httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False, trust_env=False,
                        headers={"User-Agent": "memsvc"})


def post_json(client: httpx.Client, url: str, body: dict[str, Any], api_key: str | None,
              timeout_s: float | None = None) -> Any:
    """POST `body` as JSON, return the decoded JSON answer, or raise CallFailed."""
    problem = check_resolved(url)
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
    except httpx.TimeoutException:
        raise CallFailed(f"{host} did not answer in time") from None
    except httpx.HTTPError as exc:
        raise CallFailed(f"could not reach {host} ({type(exc).__name__})") from None
    if response.status_code in (401, 403):
        raise CallFailed(f"{host} refused the credentials (HTTP {response.status_code})",
                         status=response.status_code)
    if response.is_redirect:
        raise CallFailed(f"{host} answered with a redirect (HTTP {response.status_code}); redirects are not followed",
                         status=response.status_code)
    if response.status_code != 200:
        raise CallFailed(f"{host} answered HTTP {response.status_code}", status=response.status_code)
    try:
        return response.json()
    except ValueError:
        raise CallFailed(f"{host} answered with something that is not JSON") from None
