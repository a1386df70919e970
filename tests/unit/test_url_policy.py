"""The URL policy for endpoints a setting names: every spelling of a metadata address is
refused, every URL the HTTP client would read differently from the check is refused, and
ordinary endpoints (loopback, private networks, public names, IDNA names) pass."""

from __future__ import annotations

import pytest

from memsvc.kernel.url_policy import (
    AMBIGUOUS_IPV4,
    METADATA_PROBLEM,
    UNSPECIFIED_PROBLEM,
    Unresolvable,
    URLRefused,
    check_resolved,
    check_url,
    checked_addresses,
)

# 169.254.169.254 as Teredo client (XOR-obfuscated in the last 32 bits).
TEREDO_METADATA = "2001:0:4136:e378:8000:63bf:5601:5601"


@pytest.mark.parametrize(
    "url",
    [
        "http://0177.0.0.1:9",  # octal
        "http://1.2.3.04",  # a leading zero
        "http://00.0.0.0",
        "http://127.1",  # short form
        "http://169.254.43518",
        "http://0x7f.0.0.1",  # hex
        "http://0xa9fea9fe",
        "http://2130706433",  # one integer
        "http://1.2.3.4.",  # trailing dot on an address
        "http://0x/",
        "http://256.1.1.1/",
    ],
)
def test_ambiguous_ipv4_forms_are_refused(url):
    assert check_url(url) == AMBIGUOUS_IPV4


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.0.23/",  # Tencent Cloud
        "http://100.100.100.200/latest/meta-data/",  # Alibaba Cloud
        "http://168.63.129.16/",  # Azure WireServer
        "http://192.0.0.192/",  # Oracle Cloud (classic)
        "http://[::169.254.169.254]/",  # IPv4-compatible
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[::ffff:a9fe:a9fe]/",
        "http://[::ffff:0:a9fe:a9fe]/",  # IPv4-translated
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
        "http://[64:ff9b::169.254.169.254]/",
        "http://[64:ff9b:1::a9fe:a9fe]/",  # NAT64 local-use
        "http://[2002:a9fe:a9fe::]/",  # 6to4
        f"http://[{TEREDO_METADATA}]/",  # Teredo
        "http://[fd00:ec2::254]/",  # AWS metadata over IPv6
        "http://[fd00:ec2::23]/",
        "http://[fe80::1]/",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://METADATA.Google.Internal./",
        "http://metadata.goog/",
        "http://metadata/",
        "http://instance-data.ec2.internal/",
        "http://metadata.tencentyun.com/",
        "https://x.metadata.google.internal/",
    ],
)
def test_metadata_addresses_are_refused_in_every_form(url):
    assert check_url(url) == METADATA_PROBLEM


@pytest.mark.parametrize(
    "url", ["http://0.0.0.0:8080", "http://0.1.2.3", "http://[::]:8080", "http://[::ffff:0.0.0.0]/"]
)
def test_unspecified_addresses_are_refused(url):
    assert check_url(url) == UNSPECIFIED_PROBLEM


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://" + "a" * 64 + ".example.com/v1", "labels of 1 to 63"),
        ("http://a..b/", "labels of 1 to 63"),
        ("http://ex%41mple.com/", "labels of 1 to 63"),
        ("http://x\\y/", "labels of 1 to 63"),
        ("http://" + ".".join(["a" * 60] * 5) + "/", "at most 253"),
        ("http://exa mple.com/", "spaces or control"),
        ("http://[fe80::1%25eth0]/", "zone id"),
        ("http://[v1.x]/", "not a valid URL"),
        ("http://host:99999/", "port from 1 to 65535"),  # httpx parses it; the socket layer would raise
        ("http://host:0/", "port from 1 to 65535"),
        ("http://host/?", "query string"),
        ("http://host/#frag", "fragment"),
        ("http://user@host/", "credentials"),
        ("ftp://host/", "http or https"),
        ("http:/x", "must name a host"),
    ],
)
def test_urls_the_client_would_read_differently_are_refused(url, problem):
    refused = check_url(url)
    assert refused is not None and problem in refused
    assert url not in refused


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:9000",
        "https://api.openai.com/v1",
        "http://10.0.0.5:9000/emb",
        "http://[::1]:8080/v1",
        "http://例え.jp/v1",
        "http://100.100.100.201/",
        "http://[2002:808:808::]/",
        "http://" + "a" * 63 + ".example.com/",
        "http://my_host.internal:8080",
        "HTTPS://API.EXAMPLE.COM/v1",
        "http://169.255.0.1/",
    ],
)
def test_ordinary_endpoints_pass(url):
    assert check_url(url) is None


def test_after_dns_every_address_is_checked():
    def resolve(answer):
        return lambda host, port: list(answer)

    assert checked_addresses("api.example", 443, resolve(["203.0.113.7"])) == ["203.0.113.7"]
    for answer in (
        ["169.254.169.254"],
        ["203.0.113.7", "169.254.169.254"],
        ["::ffff:169.254.169.254"],
        ["fd00:ec2::254"],
        ["64:ff9b::a9fe:a9fe"],
        ["100.100.100.200"],
    ):
        with pytest.raises(URLRefused, match="resolves to a link-local or cloud metadata address"):
            checked_addresses("rebind.example", 80, resolve(answer))
    with pytest.raises(URLRefused, match="unspecified"):
        checked_addresses("zero.example", 80, resolve(["0.0.0.0"]))
    with pytest.raises(Unresolvable):
        checked_addresses("nothing.example", 80, resolve([]))


def test_an_ip_literal_is_never_resolved():
    def must_not_resolve(host, port):
        raise AssertionError(f"resolved {host}")

    assert checked_addresses("127.0.0.1", 80, must_not_resolve) == ["127.0.0.1"]
    assert checked_addresses("::1", 80, must_not_resolve) == ["::1"]


def test_a_settings_write_tolerates_a_name_that_does_not_resolve_yet():
    def fails(host, port):
        raise OSError("no such name")

    assert check_resolved("http://later.example/v1", unresolvable_ok=True, resolver=fails) is None
    assert check_resolved("http://later.example/v1", resolver=fails) == "names a host that does not resolve"
    assert (
        check_resolved("http://meta.example/v1", unresolvable_ok=True, resolver=lambda h, p: ["169.254.169.254"])
        == "resolves to a link-local or cloud metadata address"
    )


def test_the_system_resolver_never_raises_past_the_policy():
    """A label the IDNA codec refuses would raise UnicodeError inside getaddrinfo; the policy
    refuses it first, and any resolver error is 'does not resolve', never an exception."""
    assert "labels of 1 to 63" in check_resolved("http://" + "a" * 64 + ".com/", unresolvable_ok=True)

    def unicode_error(host, port):
        raise UnicodeError("label too long")

    assert check_resolved("http://ok.example/", unresolvable_ok=True, resolver=unicode_error) is None
