"""The process and connection settings the hot path relies on: the page cache of
every connection, the access-counter delay's bounds, and NumPy's BLAS on one thread."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from memsvc.config import Config, ConfigError
from memsvc.storage.database import Database


def test_every_connection_gets_the_configured_page_cache(tmp_path):
    db = Database(tmp_path / "memsvc.db", cache_mb=24)
    try:
        with db.read() as conn:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -24 * 1024
        with db.write() as conn:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -24 * 1024
    finally:
        db.close()
    with pytest.raises(ValueError, match="cache_mb"):
        Database(tmp_path / "other.db", cache_mb=0)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"sqlite_cache_mb": 0}, "MEMSVC_SQLITE_CACHE_MB must be at least 1"),
        ({"access_flush_s": -1.0}, "MEMSVC_ACCESS_FLUSH_S must be 0..3600"),
        ({"access_flush_s": 3601.0}, "MEMSVC_ACCESS_FLUSH_S must be 0..3600"),
    ],
)
def test_config_refuses_hot_path_values_out_of_range(fields, message):
    with pytest.raises(ConfigError, match=message):
        Config(**fields).validate()
    Config(sqlite_cache_mb=1, access_flush_s=0.0).validate()


def test_serve_runs_numpy_blas_on_one_thread():
    import numpy  # noqa: F401 - BLAS is loaded with NumPy; the limit applies to loaded libraries

    from memsvc.server import _one_blas_thread

    with threadpool_limits(limits=None, user_api="blas"):  # restores the test process's limits after
        _one_blas_thread()
        blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
        assert blas, "NumPy's BLAS is not visible to threadpoolctl"
        assert {info["num_threads"] for info in blas} == {1}
