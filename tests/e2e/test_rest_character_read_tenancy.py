"""Through the real Envoy: reading a character's chat needs `character:<name>` among the
token's tenants. `GET /api/memory/recent_file` of a character the token does not cover is
403 with the PERMISSION_DENIED reason, the same for one with a history and one without;
`GET /api/memory/recent_files` lists only the characters it covers."""

from __future__ import annotations

import urllib.parse

import pytest
from conftest import Rest
from test_rest_character_tenancy import ADMIN, ERROR_INFO, gateway  # noqa: F401 - the server behind Envoy

pytestmark = pytest.mark.e2e


def _file(rest: Rest, character: str) -> tuple[int, dict]:
    query = urllib.parse.urlencode({"filename": f"recent_{character}.json"})
    return rest.call("GET", "/api/memory/recent_file?" + query)


def _refusal(rest: Rest, character: str) -> tuple[int, int, str, list[str]]:
    status, body = _file(rest, character)
    assert f"'character:{character}'" in body["message"], body
    return (
        status,
        body["code"],
        body["message"].replace(character, "<name>"),
        [d["reason"] for d in body["details"] if d["@type"] == ERROR_INFO],
    )


def test_character_reads_over_rest_need_the_characters_owner(gateway):  # noqa: F811
    handle, base = gateway
    admin = Rest(base, ADMIN)
    token = lambda name, tenants: Rest(
        base,
        handle.app.credentials.create(  # noqa: E731
            name, ["read:memory"], tenants, True
        ).token,
    )
    for name in ("Mia", "Nia"):
        append = {"character": name, "messages": [{"role": "human", "text": f"{name} loves green tea"}]}
        assert admin.call("POST", "/api/memory/recent_file/append", append)[0] == 200
    other, mia = token("other", ["character:Other"]), token("mia", ["character:Mia"])
    refused = _refusal(other, "Mia")
    assert refused == _refusal(other, "Ghost"), "a refusal told a history from none"
    assert refused[:2] == (403, 7) and refused[3] == ["PERMISSION_DENIED"], refused
    assert _file(other, "Other")[0] == 404
    status, snap = _file(mia, "Mia")
    assert status == 200 and "Mia loves green tea" in snap["content"]
    assert mia.call("GET", "/api/memory/recent_files") == (200, {"files": ["recent_Mia.json"]})
    assert other.call("GET", "/api/memory/recent_files")[1].get("files", []) == []
    assert admin.call("GET", "/api/memory/recent_files")[1]["files"] == ["recent_Mia.json", "recent_Nia.json"]
