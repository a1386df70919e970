"""MEMSVC_DATABASE_URL as configuration: which URLs select the shared store, how its
password is kept out of everything printed, and the pool size's bounds."""

from __future__ import annotations

import pytest

from memsvc.config import Config, ConfigError, load, mask_url


@pytest.mark.parametrize(
    "url, masked",
    [
        ("postgresql://app:s3cret@db.internal:5432/memsvc", "postgresql://app:***@db.internal:5432/memsvc"),
        (
            "postgres://app:s3cret@[::1]:5432/memsvc?sslmode=require",
            "postgres://app:***@[::1]:5432/memsvc?sslmode=require",
        ),
        ("postgresql://app@db/memsvc", "postgresql://app@db/memsvc"),  # no password: nothing to hide
        ("postgresql://db/memsvc", "postgresql://db/memsvc"),
        ("postgresql://app:s3cret@db:port/memsvc", "postgresql://***"),  # unparsable: the scheme only
    ],
)
def test_the_password_is_masked(url, masked):
    assert mask_url(url) == masked
    assert "s3cret" not in mask_url(url)


@pytest.mark.parametrize("url", ["postgresql://app:s3cret@db/memsvc", "POSTGRES://db/memsvc", "postgresql:///memsvc"])
def test_postgresql_urls_are_accepted_and_never_in_the_repr(url):
    config = load(env={"MEMSVC_DATABASE_URL": url})
    config.validate()
    assert config.shared_store and config.database_url == url
    assert "s3cret" not in repr(config) and "s3cret" not in config.database_location


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://root:s3cret@db/memsvc", "got scheme 'mysql'"),
        ("sqlite:///data/memsvc.db", "got scheme 'sqlite'"),
        ("db.internal:5432/memsvc", "got no scheme"),
        ("postgresql://app:s3cret@db:notaport/memsvc", "not a valid URL"),
    ],
)
def test_other_urls_are_refused_without_quoting_them(url, message):
    with pytest.raises(ConfigError) as refused:
        Config(database_url=url).validate()
    assert message in str(refused.value) and "s3cret" not in str(refused.value)


def test_unset_is_sqlite_under_the_data_dir():
    config = load(env={"MEMSVC_DATABASE_URL": " "})
    config.validate()
    assert not config.shared_store and config.database_location == str(config.db_path)


@pytest.mark.parametrize("size, ok", [(1, True), (1000, True), (0, False), (1001, False)])
def test_the_pool_size_is_bounded(size, ok):
    config = load(env={"MEMSVC_DATABASE_POOL_SIZE": str(size)})
    if ok:
        config.validate()
    else:
        with pytest.raises(ConfigError, match="MEMSVC_DATABASE_POOL_SIZE"):
            config.validate()
