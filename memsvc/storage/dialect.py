"""The seam between the one memory store (`memsvc.storage.memory_store`) and the two
databases it runs on: what differs in the text of a statement (`Syntax`) and what differs in
behaviour (`Dialect`). Everything else is written once.

Why two parts: the text of a statement (placeholders, casts, boolean literals, a list bound
as one parameter) is plain data that any module writing SQL needs, including the vector
indexes and the keyword search, without the driver; the behaviour (the upsert, driver errors,
the keyword search itself, how a row becomes a Memory) needs the driver, so each database
keeps it beside its connections (`memsvc.storage.sqlite_backend`,
`memsvc.storage.postgres.memory_backend`).

Statements are written with `?` placeholders and `{word}` fragments; `Syntax.sql` turns a
template into the database's text once (cached), so a statement costs no formatting per call.

The two rules both stores keep, written here once:
- the scope rule (`scope_clause`, `aged_clause`): which memories a retrieval's scope sees;
- text holding a NUL character is refused (`refuse_nul`): PostgreSQL's text and jsonb cannot
  hold one, so SQLite refuses it too, with the same ValidationError (INVALID_ARGUMENT),
  before anything is written.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.changes import ChangeCause
from memsvc.kernel.errors import ConflictError, ValidationError, shorten
from memsvc.kernel.models import KeywordHit, Memory, MemoryPatch, NewMemory, SearchScope, UpsertResult, utcnow
from memsvc.storage.database import Database, iso, parse_iso


@dataclass(frozen=True, eq=False)
class Syntax:
    """What differs in the text of a statement. `words` fill a template's `{word}` fragments:
    true/false (boolean literals), json/bool/ts (a bound value of that type), now (the write
    transaction's time), same (null-safe equality with a bound text), length (characters of a
    text), bytewise (after ORDER BY a text column: by its bytes, as SQLite's BINARY does).
    `time` turns a datetime into the bound value the time columns compare with; `read_time`
    and `read_json` turn a time or JSON column's value as read back (SQLite hands back text,
    psycopg aware datetimes and parsed JSON); `now_params` is what `{now}` binds."""

    name: str
    placeholder: str
    words: Mapping[str, str]
    time: Callable[[datetime | None], Any]
    #: `column IN <list bound as one parameter>`, with {column} and {kind} (text or bigint).
    in_list: str
    list_value: Callable[[Sequence[Any]], Any]
    read_time: Callable[[Any], datetime | None]
    read_json: Callable[[Any], Any]
    now_params: Callable[[], list[Any]]

    def sql(self, template: str) -> str:
        """The template as this database's statement (cached: templates are constants)."""
        return _translate(self, template)

    def any_of(self, column: str, values: Sequence[Any], kind: str = "text") -> tuple[str, Any]:
        """`column` is one of `values`: the fragment and its one parameter."""
        return self.in_list.format(column=column, kind=kind), self.list_value(list(values))


@functools.lru_cache(maxsize=4096)
def _translate(syntax: Syntax, template: str) -> str:
    text = template.format_map(syntax.words)
    return text if syntax.placeholder == "?" else text.replace("?", syntax.placeholder)


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


SQLITE_SQL = Syntax(
    name="sqlite",
    placeholder="?",
    time=iso,
    words={
        "true": "1",
        "false": "0",
        "json": "?",
        "bool": "?",
        "ts": "?",
        "now": "?",
        "same": "IS ?",
        "length": "length",
        "bytewise": "",
    },
    in_list="{column} IN (SELECT value FROM json_each(?))",
    list_value=json.dumps,
    read_time=parse_iso,
    read_json=json.loads,
    now_params=lambda: [iso(utcnow())],
)
POSTGRES_SQL = Syntax(
    name="postgres",
    placeholder="%s",
    time=lambda moment: moment,
    words={
        "true": "true",
        "false": "false",
        "json": "?::jsonb",
        "bool": "?::boolean",
        "ts": "?::timestamptz",
        "now": "now()",
        "same": "IS NOT DISTINCT FROM ?::text",
        "length": "char_length",
        "bytewise": ' COLLATE "C"',
    },
    in_list="{column} = ANY(?::{kind}[])",
    list_value=list,
    read_time=_utc,
    read_json=lambda value: value,
    now_params=list,
)


def syntax_of(db: Any) -> Syntax:
    """The statements' syntax of a database object: SQLite's for a `Database`, else PostgreSQL's."""
    return SQLITE_SQL if isinstance(db, Database) else POSTGRES_SQL


# -- the scope rule ----------------------------------------------------------------------------


def _visible_clause(syntax: Syntax, scope: SearchScope, alias: str) -> tuple[str, list[Any]]:
    """Owner, session and expiry: the scope's limits other than age. A session scope with no
    session id sees the memories stored without one."""
    clauses = [f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)"]
    params: list[Any] = [syntax.time(scope.now)]
    if scope.api_key_id is not None:
        clauses.append(f"{alias}.api_key_id = ?")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append(f"{alias}.session_id {{same}}")
        params.append(scope.session_id)
    return " AND ".join(clauses), params


def scope_clause(syntax: Syntax, scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]]:
    """THE scope rule: WHERE fragments (no leading WHERE) and their parameters selecting what
    a retrieval may see on table alias `alias`: the owner's (any owner's for a global scope),
    the session's when session-only, not expired, and inside retention unless kept."""
    where, params = _visible_clause(syntax, scope, alias)
    if scope.created_after is not None:
        where += f" AND ({alias}.created_at >= ? OR {alias}.keep = {{true}})"
        params.append(syntax.time(scope.created_after))
    return syntax.sql(where), params


def aged_clause(syntax: Syntax, scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]] | None:
    """What the scope would see but for its age (older than retention, not kept); None when
    the scope has no age limit."""
    if scope.created_after is None:
        return None
    where, params = _visible_clause(syntax, scope, alias)
    where += f" AND {alias}.created_at < ? AND {alias}.keep = {{false}}"
    return syntax.sql(where), [*params, syntax.time(scope.created_after)]


# -- the NUL rule ------------------------------------------------------------------------------


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(v) for v in value)
    return False


def refuse_nul(draft: NewMemory | MemoryPatch) -> None:
    """ValidationError naming the first field of `draft` whose text holds a NUL character:
    one store cannot hold it, so neither stores it (nothing is written)."""
    for name in ("api_key_id", "session_id", "type", "key", "content", "metadata"):
        refuse_nul_in(name, getattr(draft, name, None))


def refuse_nul_in(name: str, value: Any) -> None:
    """The NUL rule for one value: a draft's field, or a text a read filters by (nothing
    stored can hold one)."""
    if _holds_nul(value):
        raise ValidationError.single(name, "must not contain a NUL character (\\u0000)")


def duplicate_key(key: str) -> ConflictError:
    """What a write that would give an owner two memories with one key raises."""
    return ConflictError(
        f"another memory of this owner already has the key {shorten(key)!r}",
        reason="DUPLICATE_KEY",
        metadata={"key": key},
    )


# -- behaviour ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Dialect(ABC):
    """What the memory store needs from a database beyond the text of its statements: the
    statements written differently for a reason (the upsert, the batched updates, the keyword
    search), how a row becomes a Memory, which driver errors are the store's own. Every `conn`
    is the driver's connection inside the database's read() or write() block (driver errors in
    general are the database's: `memsvc.storage.transactions`)."""

    syntax: Syntax
    #: The module with happened_within / neighbours for this database.
    timeline: ModuleType
    #: A `memory_rows.COLUMNS` row as a Memory.
    row_to_memory: Callable[[Sequence[Any]], Memory]
    #: The per-backend cache of the corpus statistics keyword search reads.
    keyword_cache: Callable[[], TtlCache[Any]]
    #: How this database reads its change feed (a `memsvc.storage.lifecycle.FeedSql`).
    feed: Any

    @property
    def name(self) -> str:
        return self.syntax.name

    def health_facts(self, db: Any) -> dict[str, object]:
        """What a health probe reports beyond ok/backend without asking the database."""
        return {}

    def health_measures(self, db: Any) -> dict[str, object]:
        """What a health probe measures once `SELECT 1` answered."""
        return {}

    @abstractmethod
    def write_error(self, exc: Exception, key: str | None) -> Exception:
        """An error of a statement that wrote a memory as the store's error: the unique index
        on (api_key_id, key) refusing `key` as duplicate_key(key); unchanged when it is none."""

    @abstractmethod
    def bind_cause(self, conn: Any, cause: ChangeCause, now: str | None) -> AbstractContextManager[Any]:
        """Around statements of a write transaction: who makes them and why, as the history
        triggers read it (`now`: the transaction's time from `clock`)."""

    @abstractmethod
    def in_transaction(self, conn: Any) -> bool:
        """Whether `conn`'s write transaction is still open and usable after an error."""

    @abstractmethod
    def draft(self, db: Any, conn: Any) -> AbstractContextManager[Any]:
        """Around one draft of a batch: what makes its failure undo only its own statement."""

    @abstractmethod
    def changes(self, conn: Any, cursor: Any) -> int:
        """Rows the statement of `cursor` changed."""

    @abstractmethod
    def clock(self) -> str | None:
        """One write transaction's time as bound to `{now}` (None: the server's now())."""

    @abstractmethod
    def upsert(self, conn: Any, memory: NewMemory, now: str | None) -> UpsertResult:
        """Insert `memory`, or with a key update the owner's row with that key in place."""

    @abstractmethod
    def rewrite_contents(self, conn: Any, contents: Mapping[str, str], now: str | None) -> int:
        """Replace several memories' content; returns rows changed."""

    @abstractmethod
    def touch(self, conn: Any, counts: Mapping[str, int], now: str | None) -> None:
        """access_count + n and last_accessed_at = now for each id."""

    @abstractmethod
    def search_keyword(
        self, conn: Any, scope: SearchScope, text: str, limit: int, cache: TtlCache[Any]
    ) -> list[KeywordHit]:
        """The store's keyword search (when no working set answers)."""

    @abstractmethod
    def keyword_probe(self, conn: Any) -> None:
        """A real match through the keyword index; raises when it fails."""

    @abstractmethod
    def initialize(self, db: Any) -> str | None:
        """Migrate `db`; returns the collation text comparisons fold case under (or None)."""

    @abstractmethod
    def contains(self, q: str, collation: str | None) -> tuple[str, list[Any]]:
        """Case-insensitive literal substring of content or key: fragment and parameters."""

    @abstractmethod
    def working_set_port(self, db: Any) -> Any:
        """The working sets' reads for this database (memsvc.working_set)."""
