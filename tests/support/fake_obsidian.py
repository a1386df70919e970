"""A loopback stand-in for Obsidian's Local REST API plugin, with the routes and shapes of its
published OpenAPI description: `GET /` (no auth; says whether the key was accepted),
`GET|PUT|DELETE /vault/{path}` (`Accept: application/vnd.olrapi.note+json` gives the NoteJson
object: content, frontmatter, path, stat, tags), `GET /vault/{dir}/` ({"files": [...]},
names relative to the folder, sub-folders ending in '/'), and `POST /search/simple/?query=`
([{filename, score, matches: [{match: {start, end}, context}]}], every word must occur).
Errors are {"errorCode", "message"}, 401 without the bearer key."""

from __future__ import annotations

import ssl
import time

import yaml

from support.fake_api import FakeApi, Reply, Request

NOTE_JSON = "application/vnd.olrapi.note+json"


def frontmatter(text: str) -> dict:
    if text.startswith("---\n"):
        end = text.find("\n---", 3)
        if end != -1:
            parsed = yaml.safe_load(text[4:end])
            return parsed if isinstance(parsed, dict) else {}
    return {}


class FakeObsidian(FakeApi):
    def __init__(self, api_key: str = "obsidian-test-key-1234", tls: ssl.SSLContext | None = None):
        self.api_key = api_key
        self.vault: dict[str, str] = {}
        self.times: dict[str, tuple[float, float]] = {}
        super().__init__(tls)

    def note(self, path: str) -> str | None:
        with self._lock:
            return self.vault.get(path)

    def put_note(self, path: str, text: str) -> None:
        with self._lock:
            self._write(path, text)

    def _write(self, path: str, text: str) -> None:
        now = time.time() * 1000
        self.times[path] = (self.times.get(path, (now, now))[0], now)
        self.vault[path] = text

    def route(self, r: Request) -> Reply:
        if r.method == "GET" and r.path == "/":
            return Reply(
                200,
                {
                    "ok": "OK",
                    "service": "Obsidian Local REST API",
                    "authenticated": r.headers.get("authorization") == f"Bearer {self.api_key}",
                    "versions": {"obsidian": "1.5.0", "self": "3.0.0"},
                },
            )
        if r.headers.get("authorization") != f"Bearer {self.api_key}":
            return Reply(401, {"errorCode": 40101, "message": "Authorization required."})
        if r.path.startswith("/vault/"):
            return self._vault(r, r.path[len("/vault/") :])
        if r.method == "POST" and r.path == "/search/simple/":
            return Reply(200, self._search(r.query.get("query", "")))
        return Reply(404, {"errorCode": 40400, "message": "Not Found"})

    def _vault(self, r: Request, path: str) -> Reply:
        if path.endswith("/") or path == "":
            if r.method != "GET":
                return Reply(405, {"errorCode": 40510, "message": "Path is a directory"})
            return self._listing(path)
        if r.method == "PUT":
            self._write(path, r.text)
            return Reply(204)
        if path not in self.vault:
            return Reply(404, {"errorCode": 40400, "message": "File does not exist"})
        if r.method == "DELETE":
            del self.vault[path]
            return Reply(204)
        if r.method != "GET":
            return Reply(405, {"errorCode": 40500, "message": "Method not allowed"})
        text = self.vault[path]
        if r.headers.get("accept") == NOTE_JSON:
            ctime, mtime = self.times.get(path, (0.0, 0.0))
            return Reply(
                200,
                {
                    "content": text,
                    "frontmatter": frontmatter(text),
                    "path": path,
                    "tags": [],
                    "stat": {"ctime": ctime, "mtime": mtime, "size": len(text.encode())},
                },
                content_type=NOTE_JSON,
            )
        return Reply(200, text, content_type="text/markdown")

    def _listing(self, folder: str) -> Reply:
        names = set()
        for path in self.vault:
            if path.startswith(folder):
                rest = path[len(folder) :]
                names.add(rest.split("/", 1)[0] + "/" if "/" in rest else rest)
        if not names:
            return Reply(404, {"errorCode": 40400, "message": "Not Found"})
        return Reply(200, {"files": sorted(names)})

    def _search(self, query: str) -> list[dict]:
        words = [w for w in query.lower().split() if w]
        out = []
        for path, text in self.vault.items():
            lowered = text.lower()
            if words and all(w in lowered for w in words):
                start = lowered.find(words[0])
                out.append(
                    {
                        "filename": path,
                        "score": -float(start),
                        "matches": [
                            {
                                "match": {"start": start, "end": start + len(words[0])},
                                "context": text[max(0, start - 20) : start + 20],
                            }
                        ],
                    }
                )
        return sorted(out, key=lambda h: h["score"], reverse=True)
