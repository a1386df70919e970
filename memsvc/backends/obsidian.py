"""An Obsidian vault as a backend, through the Local REST API plugin.

Each memory is one note, `<folder>/<id>.md`: the memory's fields in YAML frontmatter and its
content as the note's body, so the vault stays readable and editable in Obsidian (a memory
kept with no age limit says `keep: true` there; `occurredAt` is when the recorded thing
happened, ISO 8601). The plugin's routes used: `GET /` (status; the only route without
authentication, it says whether the key was accepted), `PUT|GET|DELETE /vault/<path>`
(write, read as `application/vnd.olrapi.note+json`, delete a note), `GET /vault/<folder>/`
(the folder's files) and `POST /search/simple/?query=` (full-text search over the vault).
The plugin serves https on 127.0.0.1:27124 with a self-signed certificate (pass it as
`caCertificate`; the plugin offers it at `/obsidian-local-rest-api.crt`) and, when enabled
in its settings, plain http on 127.0.0.1:27123.

A memory with a key gets an id derived from (owner, key), so a create with the same key
overwrites the same note: the upsert rule without a lookup."""

from __future__ import annotations

import builtins
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

import yaml

from memsvc.backends.base import (
    Connection,
    RemoteBackend,
    fresh,
    matches,
    memory_from_json,
    newest_first,
    page_of,
    patched,
    path_segment,
    to_iso,
    upserted,
)
from memsvc.core.retrieval.vector_tier import in_scope
from memsvc.kernel.backend import BackendError, BackendHealth, BackendSearch, ScoredMemory
from memsvc.kernel.models import Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory, UpsertResult, utcnow
from memsvc.kernel.text import scoring_tokens

DEFAULT_BASE_URL = "https://127.0.0.1:27124"
DEFAULT_FOLDER = "memsvc"
NOTE_JSON = "application/vnd.olrapi.note+json"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_KEYED = uuid.UUID("6b1f4f53-8c3e-4b8e-9a55-1f0b6c1d2e3f")
#: Per-term searches when the whole query finds nothing (the plugin requires every word).
MAX_TERMS = 4


def note_text(memory: Memory) -> str:
    front = {
        "memsvc": 1,
        "id": memory.id,
        "apiKeyId": memory.api_key_id,
        "sessionId": memory.session_id,
        "type": memory.type,
        "key": memory.key,
        "metadata": json.dumps(memory.metadata, ensure_ascii=False, separators=(",", ":")),
        "createdAt": to_iso(memory.created_at),
        "updatedAt": to_iso(memory.updated_at),
        "expiresAt": to_iso(memory.expires_at),
        "occurredAt": to_iso(memory.occurred_at),
        # Only a kept note says so (`keep: true`); a note without it ages with retentionDays.
        "keep": True if memory.keep else None,
    }
    front = {k: v for k, v in front.items() if v is not None}
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + memory.content


def note_body(text: str) -> str:
    """The note without its frontmatter block."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end != -1:
            return text[end + 5 :]
        if text.endswith("\n---"):
            return ""
    return text


def memory_from_note(note: Any, memory_id: str) -> Memory:
    if not isinstance(note, Mapping) or not isinstance(note.get("content"), str):
        raise BackendError("the vault answered with something that is not a note")
    frontmatter, stat = note.get("frontmatter"), note.get("stat")
    front: Mapping[str, Any] = frontmatter if isinstance(frontmatter, Mapping) else {}
    metadata = front.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = {}
    fields = {**front, "id": memory_id, "content": note_body(note["content"]), "metadata": metadata}
    times: Mapping[str, Any] = stat if isinstance(stat, Mapping) else {}
    fields.setdefault("createdAt", times.get("ctime"))
    fields.setdefault("updatedAt", times.get("mtime"))
    return memory_from_json(fields)


class ObsidianBackend(RemoteBackend):
    kind = "obsidian"

    def __init__(self, name: str, connection: Connection, folder: str = DEFAULT_FOLDER):
        super().__init__(name, connection)
        self.folder = folder.strip("/")

    def _path(self, memory_id: str) -> str:
        return f"/vault/{self.folder}/{path_segment(memory_id)}.md"

    def health(self) -> BackendHealth:
        health, body = self.http.probe("GET", "/")
        if not health.ok:
            return health
        if not isinstance(body, Mapping) or "service" not in body:
            return BackendHealth(False, health.latency_ms, f"{self.http.host} is not an Obsidian Local REST API")
        if body.get("authenticated") is not True:
            return BackendHealth(False, health.latency_ms, f"{self.http.host} did not accept the API key")
        return health

    def _read(self, memory_id: str) -> Memory | None:
        if not _ID.match(memory_id):
            return None  # not an id this backend hands out; never a path into the rest of the vault
        response = self.http.call("GET", self._path(memory_id), accept=NOTE_JSON)
        if response.status_code == 404:
            return None
        return memory_from_note(self.http.json(response), memory_id)

    def _write(self, memory: Memory) -> None:
        self.http.expect(
            self.http.call("PUT", self._path(memory.id), content=note_text(memory), content_type="text/markdown")
        )

    def create(self, memory: NewMemory) -> UpsertResult:
        now = utcnow()
        if memory.key:
            memory_id = str(uuid.uuid5(_KEYED, f"{memory.api_key_id}\x00{memory.key}"))
            existing = self._read(memory_id)
        else:
            memory_id, existing = str(uuid.uuid4()), None
        stored = upserted(existing, memory, now) if existing else fresh(memory, memory_id, now)
        self._write(stored)
        return UpsertResult(memory_id, existing is None, memory=stored)

    def get(self, memory_id: str) -> Memory | None:
        return self._read(memory_id)

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        existing = self._read(memory_id)
        if existing is None:
            return None
        stored = patched(existing, patch, utcnow())
        self._write(stored)
        return stored

    def delete(self, memory_id: str) -> bool:
        if not _ID.match(memory_id):
            return False
        response = self.http.call("DELETE", self._path(memory_id))
        if response.status_code == 404:
            return False
        self.http.expect(response)
        return True

    def _ids(self) -> list[str]:
        response = self.http.call("GET", f"/vault/{self.folder}/")
        if response.status_code == 404:
            return []  # the folder does not exist yet: no memories
        body = self.http.json(response)
        files = body.get("files") if isinstance(body, Mapping) else None
        if not isinstance(files, list):
            raise BackendError("the vault answered a folder listing without files")
        names = (str(f).rsplit("/", 1)[-1] for f in files if isinstance(f, str) and f.endswith(".md"))
        return [n[:-3] for n in names if _ID.match(n[:-3])]

    def _all(self) -> list[Memory]:
        return [m for m in (self._read(i) for i in self._ids()) if m is not None and m.api_key_id]

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """Reads every note of the folder (the plugin has no query by frontmatter field
        that pages): fine for a vault's worth of memories, not for millions."""
        found = newest_first([m for m in self._all() if matches(m, flt)])
        page = page_of(found)
        return page_of(found[offset : offset + limit], page.total, page.by_type)

    def _search_files(self, query: str) -> dict[str, float]:
        body = self.http.json(self.http.call("POST", "/search/simple/", params={"query": query, "contextLength": 0}))
        if not isinstance(body, list):
            raise BackendError("the vault answered a search with something that is not a list")
        prefix = self.folder + "/"
        out: dict[str, float] = {}
        for hit in body:
            name = hit.get("filename") if isinstance(hit, Mapping) else None
            if isinstance(name, str) and name.startswith(prefix) and name.endswith(".md"):
                score = hit.get("score")
                out[name[len(prefix) : -3]] = float(score) if isinstance(score, (int, float)) else 0.0
        return out

    def search(self, request: BackendSearch) -> builtins.list[ScoredMemory]:
        """The plugin's simple search with the whole query; when that finds nothing (every
        word must occur), once per longest query term, ranked by how many terms matched."""
        hits = self._search_files(request.query) if request.query.strip() else {}
        if not hits and request.query.strip():
            terms = sorted(set(scoring_tokens(request.query)), key=len, reverse=True)[:MAX_TERMS]
            for term in terms:
                for memory_id in self._search_files(term):
                    hits[memory_id] = hits.get(memory_id, 0.0) + 1.0
        return self._in_scope(sorted(hits.items(), key=lambda kv: kv[1], reverse=True), request)

    def _in_scope(
        self, ranked: builtins.list[tuple[str, float]], request: BackendSearch
    ) -> builtins.list[ScoredMemory]:
        """The best `limit` hits the search may return, read note by note in rank order: the
        vault search sees every owner's notes and every age, so another owner's note, or one
        older than the retention window and not kept, must not take a ranked slot."""
        out: list[ScoredMemory] = []
        for memory_id, score in ranked:
            if len(out) >= request.limit:
                break
            memory = self._read(memory_id) if _ID.match(memory_id) else None
            if memory is not None and in_scope(memory, request.scope):
                out.append(ScoredMemory(memory, score))
        return out
