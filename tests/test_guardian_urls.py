"""The raw URL checks, as a table of bypass attempts and the public URLs that must still pass.

Each row is judged the way ``check-url URL --resolves-to IP`` judges it: the raw string, then the
address policy on an IP literal, then, for a name, the policy on the given answers. Pure
decisions: nothing here resolves a name or opens a socket.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Sequence

import pytest
import yarl
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.errors import DestinationBlocked, GuardianRefusal, ResearchError
from worker.guardian.policy import AddressPolicy
from worker.guardian.urls import canonical_url, check_url, parse_https_url
from worker.limits import MAX_URL_LENGTH

ALLOWED = ("allowed", "")
SCHEME = ("scheme_not_allowed", "scheme")


def blocked(reason: str) -> tuple[str, str]:
    return ("destination_blocked", reason)


def judge(url: str, answers: Sequence[str] = ()) -> tuple[str, str]:
    policy = AddressPolicy()
    try:
        target = check_url(url, policy)
        if target.address is None and answers:
            policy.check_answers(target.host, [ipaddress.ip_address(a) for a in answers])
    except GuardianRefusal as refusal:
        return (refusal.kind, refusal.reason)
    return ALLOWED


def row(url: str, expected: tuple[str, str], why: str, answers: Sequence[str] = ()) -> object:
    return pytest.param(url, list(answers), expected, id=why)


URLS = [
    # Public controls.
    row("https://example.com/", ALLOWED, "a plain https URL"),
    row("https://example.com", ALLOWED, "a URL without a path"),
    row("https://example.com/a/b?q=1&r=2#frag", ALLOWED, "a path, a query and a fragment"),
    row("HTTPS://EXAMPLE.COM/", ALLOWED, "the scheme and host in capitals"),
    row("HtTpS://Example.Com/", ALLOWED, "the scheme and host in mixed case"),
    row("https://8.8.8.8/", ALLOWED, "a public IPv4 literal"),
    row("https://1.1.1.1:8443/dns-query", ALLOWED, "a public IPv4 literal with a port"),
    row("https://93.184.216.34/", ALLOWED, "another public IPv4 literal"),
    row("https://[2606:4700:4700::1111]/", ALLOWED, "a public IPv6 literal"),
    row("https://[2001:4860:4860::8888]:443/", ALLOWED, "a public IPv6 literal with the default port"),
    row("https://[::ffff:8.8.8.8]/", ALLOWED, "a public IPv4 as IPv4-mapped IPv6"),
    row("https://example.com/", ALLOWED, "a name resolving to public addresses", ["93.184.216.34"]),
    row("https://example.com:65535/", ALLOWED, "the highest port"),
    row("https://example.com:1/", ALLOWED, "the lowest port"),
    row("https://example.com:/", ALLOWED, "an empty port means the default"),
    row("https://example.com./", ALLOWED, "a fully qualified name with its root dot"),
    row("https://exa_mple.com/", ALLOWED, "an underscore in a name"),
    row("https://1.2.3.4.example.com/", ALLOWED, "a name whose first labels are numbers"),
    row("https://bücher.example/", ALLOWED, "an IDNA name"),
    row("https://faß.de/", ALLOWED, "an IDNA name with sharp s"),
    row("https://例え.テスト/", ALLOWED, "an IDNA name in Japanese"),
    row("https://xn--nxasmq6b.com/", ALLOWED, "a name already in punycode"),
    row("https://ＥＸＡＭＰＬＥ.com/", ALLOWED, "full-width letters fold to a plain name"),
    row("https://münchen.de./", ALLOWED, "an IDNA name with its root dot"),
    row("https://example.com/@127.0.0.1", ALLOWED, "an @ in the path is not userinfo"),
    row("https://example.com?@127.0.0.1", ALLOWED, "an @ in the query is not userinfo"),
    row("https://example.com#@127.0.0.1", ALLOWED, "an @ in the fragment is not userinfo"),
    row("https://example.com/%2e%2e/%00", ALLOWED, "percent escapes in the path are the server's business"),
    # Numeric hosts: getaddrinfo and the WHATWG parser both read these as 127.0.0.1.
    row("https://2130706433/", blocked("ambiguous_ip"), "decimal form of loopback"),
    row("https://0177.0.0.1/", blocked("ambiguous_ip"), "octal form of loopback"),
    row("https://017700000001/", blocked("ambiguous_ip"), "octal integer form of loopback"),
    row("https://0x7f.1/", blocked("ambiguous_ip"), "hex short form of loopback"),
    row("https://0x7f000001/", blocked("ambiguous_ip"), "hex integer form of loopback"),
    row("https://0X7F.0.0.1/", blocked("ambiguous_ip"), "hex form in capitals"),
    row("https://0x7f.0.0.1/", blocked("ambiguous_ip"), "hex first octet"),
    row("https://0177.0x0.0.1/", blocked("ambiguous_ip"), "mixed octal and hex"),
    row("https://127.1/", blocked("ambiguous_ip"), "short form of loopback"),
    row("https://127.0.1/", blocked("ambiguous_ip"), "three-part form of loopback"),
    row("https://127.0.0.01/", blocked("ambiguous_ip"), "a leading zero turns a part octal"),
    row("https://0/", blocked("ambiguous_ip"), "a bare zero is 0.0.0.0"),
    row("https://0x/", blocked("ambiguous_ip"), "an empty hex part is zero"),
    row("https://0x7f.1./", blocked("ambiguous_ip"), "hex short form with a trailing dot"),
    row("https://2130706433./", blocked("ambiguous_ip"), "decimal form with a trailing dot"),
    row("https://1.2.3.4.5/", blocked("ambiguous_ip"), "five numeric parts"),
    row("https://example.1/", blocked("ambiguous_ip"), "a name ending in a number"),
    row("https://example.0x1/", blocked("ambiguous_ip"), "a name ending in a hex number"),
    row("https://１２７.０.０.１/", blocked("ambiguous_ip"), "full-width digits of loopback"),
    row("https://８.８.８.８/", blocked("ambiguous_ip"), "full-width digits even of a public address"),
    row("https://①②⑦.0.0.1/", blocked("ambiguous_ip"), "circled digits"),
    row("https://０x7f。１/", blocked("ambiguous_ip"), "full-width hex short form with an ideographic dot"),
    row("https://0x7f.0.0.1。/", blocked("ambiguous_ip"), "hex form with an ideographic trailing dot"),
    row("https://127。0。0。1/", blocked("loopback"), "ideographic dots fold into loopback"),
    row("https://127．0．0．1/", blocked("loopback"), "full-width dots fold into loopback"),
    row("https://127｡0｡0｡1/", blocked("loopback"), "half-width ideographic dots fold into loopback"),
    row("https://127.0.0.1。/", blocked("loopback"), "an ideographic trailing dot folds into loopback"),
    # Blocked IPv4 literals, canonical form.
    row("https://127.0.0.1/", blocked("loopback"), "IPv4 loopback"),
    row("https://127.0.0.1./", blocked("loopback"), "IPv4 loopback with a trailing dot"),
    row("https://127.0.0.1:6379/", blocked("loopback"), "a local Redis"),
    row("https://0.0.0.0/", blocked("unspecified"), "0.0.0.0 reaches loopback"),
    row("https://10.0.0.1/", blocked("private"), "a 10/8 host"),
    row("https://172.16.0.1/", blocked("private"), "a 172.16/12 host"),
    row("https://192.168.1.1/", blocked("private"), "a home router"),
    row("https://100.64.0.1/", blocked("cgnat"), "carrier-grade NAT"),
    row("https://192.0.2.1/", blocked("documentation"), "TEST-NET-1"),
    row("https://198.18.0.1/", blocked("benchmarking"), "benchmarking"),
    row("https://224.0.0.1/", blocked("multicast"), "multicast"),
    row("https://240.0.0.1/", blocked("reserved"), "class E"),
    row("https://255.255.255.255/", blocked("reserved"), "limited broadcast"),
    # Metadata services.
    row("https://169.254.169.254/latest/meta-data/", blocked("link_local"), "the metadata address"),
    row("https://169.254.169.254./", blocked("link_local"), "the metadata address with a trailing dot"),
    row("https://[::ffff:169.254.169.254]/", blocked("link_local"), "the metadata address IPv4-mapped"),
    row("https://[::ffff:a9fe:a9fe]/", blocked("link_local"), "the metadata address mapped in hex"),
    row("https://[fe80::a9fe:a9fe]/", blocked("link_local"), "the metadata address as IPv6 link-local"),
    row("https://[fd00:ec2::254]/", blocked("private"), "the AWS IPv6 metadata address"),
    row("https://100.100.100.200/", blocked("cgnat"), "the Alibaba Cloud metadata address"),
    row("https://metadata.google.internal/", blocked("link_local"), "a metadata name", ["169.254.169.254"]),
    row("https://2852039166/", blocked("ambiguous_ip"), "the metadata address in decimal"),
    row("https://0xa9.0xfe.0xa9.0xfe/", blocked("ambiguous_ip"), "the metadata address in hex"),
    # IPv6 literals and the IPv4 addresses they carry.
    row("https://[::1]/", blocked("loopback"), "IPv6 loopback"),
    row("https://[::1]:8443/", blocked("loopback"), "IPv6 loopback with a port"),
    row("https://[0:0:0:0:0:0:0:1]/", blocked("loopback"), "IPv6 loopback written out"),
    row("https://[::]/", blocked("unspecified"), "the IPv6 unspecified address"),
    row("https://[::ffff:127.0.0.1]/", blocked("loopback"), "IPv4-mapped loopback"),
    row("https://[::ffff:7f00:1]/", blocked("loopback"), "IPv4-mapped loopback in hex"),
    row("https://[0:0:0:0:0:ffff:127.0.0.1]/", blocked("loopback"), "IPv4-mapped loopback written out"),
    row("https://[::ffff:10.0.0.1]/", blocked("private"), "IPv4-mapped private"),
    row("https://[::127.0.0.1]/", blocked("ipv6_embeds_ipv4"), "IPv4-compatible loopback"),
    row("https://[::ffff:0:127.0.0.1]/", blocked("ipv6_embeds_ipv4"), "SIIT-translated loopback"),
    row("https://[2002:7f00:1::]/", blocked("ipv6_embeds_ipv4"), "6to4 of loopback"),
    row("https://[2002:c0a8:101::]/", blocked("ipv6_embeds_ipv4"), "6to4 of a home router"),
    row("https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", blocked("ipv6_embeds_ipv4"), "Teredo"),
    row("https://[64:ff9b::127.0.0.1]/", blocked("translation"), "NAT64 of loopback"),
    row("https://[64:ff9b::7f00:1]/", blocked("translation"), "NAT64 of loopback in hex"),
    row("https://[64:ff9b::8.8.8.8]/", blocked("translation"), "NAT64 of a public address"),
    row("https://[64:ff9b:1::a00:1]/", blocked("translation"), "local-use NAT64 of 10.0.0.1"),
    row("https://[fe80::1]/", blocked("link_local"), "IPv6 link-local"),
    row("https://[fec0::1]/", blocked("private"), "IPv6 site-local"),
    row("https://[fc00::1]/", blocked("private"), "IPv6 unique-local"),
    row("https://[ff02::1]/", blocked("multicast"), "IPv6 multicast"),
    row("https://[2001:db8::1]/", blocked("documentation"), "IPv6 documentation"),
    row("https://[4000::1]/", blocked("not_global"), "IPv6 outside global unicast"),
    row("https://[127.0.0.1]/", blocked("malformed_url"), "IPv4 in brackets"),
    row("https://[::1/", blocked("malformed_url"), "an unclosed bracket"),
    row("https://[::1]x/", blocked("malformed_url"), "text after the bracket"),
    row("https://[]/", blocked("malformed_url"), "empty brackets"),
    row("https://::1/", blocked("bad_port"), "IPv6 without brackets reads as a port"),
    row("https://[::ffff:127.000.0.1]/", blocked("malformed_url"), "a zero-padded mapped octet"),
    # Zone ids and percent signs in the host.
    row("https://[fe80::1%25eth0]/", blocked("percent_in_host"), "a zone id, encoded"),
    row("https://[fe80::1%eth0]/", blocked("percent_in_host"), "a zone id, bare"),
    row("https://[::1%25lo]/", blocked("percent_in_host"), "a zone id on loopback"),
    row("https://127.0.0.%31/", blocked("percent_in_host"), "a percent-encoded digit"),
    row("https://%31%32%37.0.0.1/", blocked("percent_in_host"), "a percent-encoded host"),
    row("https://example%2ecom/", blocked("percent_in_host"), "a percent-encoded dot"),
    row("https://exa%00mple.com/", blocked("percent_in_host"), "a percent-encoded NUL"),
    # Names that resolve to refused addresses.
    row("https://localhost/", blocked("loopback"), "localhost", ["127.0.0.1", "::1"]),
    row("https://127.0.0.1.nip.io/", blocked("loopback"), "a wildcard-DNS name of loopback", ["127.0.0.1"]),
    row("https://rebind.example/", blocked("private"), "public then private", ["93.184.216.34", "10.0.0.1"]),
    row("https://rebind.example/", blocked("private"), "private then public", ["10.0.0.1", "93.184.216.34"]),
    row("https://dns64.example/", blocked("translation"), "a DNS64 answer", ["64:ff9b::a00:1"]),
    # Schemes.
    row("http://example.com/", SCHEME, "plain http"),
    row("HTTP://example.com/", SCHEME, "plain http in capitals"),
    row("ftp://example.com/file", SCHEME, "ftp"),
    row("file:///etc/passwd", SCHEME, "a local file"),
    row("gopher://127.0.0.1:6379/_FLUSHALL", SCHEME, "gopher smuggling a Redis command"),
    row("dict://127.0.0.1:11211/stats", SCHEME, "dict"),
    row("data:text/html,<script>alert(1)</script>", SCHEME, "a data URL"),
    row("javascript:alert(1)", SCHEME, "javascript"),
    row("ws://example.com/", SCHEME, "websocket"),
    row("wss://example.com/", SCHEME, "secure websocket"),
    row("httpss://example.com/", SCHEME, "a look-alike scheme"),
    row("https+unix://%2Frun%2Fdocker.sock/info", SCHEME, "a unix socket scheme"),
    row("view-source:https://example.com/", SCHEME, "a wrapping scheme"),
    row("https:/example.com", blocked("malformed_url"), "https with one slash"),
    row("https:example.com", blocked("malformed_url"), "https with no slashes"),
    row("https:///example.com", blocked("malformed_url"), "https with three slashes"),
    row("https:\\\\example.com", blocked("backslash"), "https with backslashes"),
    row("https:/\\example.com", blocked("backslash"), "https with a slash and a backslash"),
    row("//example.com/", blocked("malformed_url"), "a scheme-relative URL"),
    row("example.com", blocked("malformed_url"), "no scheme at all"),
    row("", blocked("malformed_url"), "an empty string"),
    row("https://", blocked("malformed_url"), "no host"),
    row("https://./", blocked("malformed_url"), "a host that is only a dot"),
    row("https://a..b/", blocked("malformed_url"), "an empty label"),
    row("https://" + "a" * MAX_URL_LENGTH, blocked("malformed_url"), "a URL over the length limit"),
    # Userinfo: the host a reader sees is not the host a parser connects to.
    row("https://user@example.com/", blocked("userinfo"), "a user name"),
    row("https://user:pass@example.com/", blocked("userinfo"), "a user name and password"),
    row("https://@example.com/", blocked("userinfo"), "an empty user name"),
    row("https://example.com@127.0.0.1/", blocked("userinfo"), "a trusted name as user, loopback as host"),
    row("https://127.0.0.1@example.com/", blocked("userinfo"), "loopback as user"),
    row("https://example.com:443@169.254.169.254/", blocked("userinfo"), "a fake port before @"),
    row("https://user%40example.com@127.0.0.1/", blocked("userinfo"), "an encoded @ before a real one"),
    row("https://example.com;@127.0.0.1/", blocked("userinfo"), "a semicolon before @"),
    # Backslashes: WHATWG parsers read them as slashes, others do not.
    row("https://example.com\\@127.0.0.1/", blocked("backslash"), "a backslash before @"),
    row("https://127.0.0.1\\.example.com/", blocked("backslash"), "a backslash inside the host"),
    row("https://example.com/\\\\127.0.0.1", blocked("backslash"), "backslashes in the path"),
    # Control characters and spaces: parsers strip some and stop at others.
    row("https://exa\tmple.com/", blocked("control_character"), "a tab in the host"),
    row("https://exa\nmple.com/", blocked("control_character"), "a newline in the host"),
    row("https://example.com/\r\nX-Injected: 1", blocked("control_character"), "CRLF header injection"),
    row("https://127.0.0.1\n.example.com/", blocked("control_character"), "a newline that ends the host"),
    row("https://example.com /", blocked("control_character"), "a space"),
    row(" https://example.com/", blocked("control_character"), "a leading space"),
    row("https://example.com/\x00", blocked("control_character"), "a NUL"),
    row("\x00https://example.com/", blocked("control_character"), "a NUL before the scheme"),
    row("https://example.com/\x7f", blocked("control_character"), "DEL"),
    row("https://example.com/\x85", blocked("control_character"), "a C1 next-line"),
    row("https://exa\u3000mple.com/", blocked("control_character"), "an ideographic space"),
    row("https://example.com\u2028/", blocked("control_character"), "a line separator"),
    row("https://exa\u00a0mple.com/", blocked("control_character"), "a no-break space"),
    # Ports.
    row("https://example.com:0/", blocked("bad_port"), "port 0"),
    row("https://example.com:65536/", blocked("bad_port"), "port 65536"),
    row("https://example.com:-1/", blocked("bad_port"), "a negative port"),
    row("https://example.com:+443/", blocked("bad_port"), "a signed port"),
    row("https://example.com:44a3/", blocked("bad_port"), "a port with a letter"),
    row("https://example.com:0x1bb/", blocked("bad_port"), "a hex port"),
    row("https://example.com:８０/", blocked("bad_port"), "a full-width port"),
    row("https://example.com:443:80/", blocked("bad_port"), "two ports"),
    row("https://example.com:99999999999999999999/", blocked("bad_port"), "a port past 64 bits"),
    row("https://example.com:" + "1" * 5000 + "/", blocked("bad_port"), "a port too long for int()"),
    row("https://[::1]:0/", blocked("bad_port"), "port 0 on IPv6"),
    # Invisible characters: IDNA maps some away, hiding the real host from a reader.
    row("https://exam\u00adple.com/", blocked("invisible_character"), "a soft hyphen"),
    row("https://exa\u200dmple.com/", blocked("invisible_character"), "a zero-width joiner"),
    row("https://exa\u200bmple.com/", blocked("invisible_character"), "a zero-width space"),
    row("https://\u202emoc.elpmaxe/", blocked("invisible_character"), "a right-to-left override"),
    row("https://127.0.0.1\u200b/", blocked("invisible_character"), "a zero-width space after loopback"),
    row("https://\ufeffexample.com/", blocked("invisible_character"), "a byte-order mark"),
    row("https://exa\u2060mple.com/", blocked("invisible_character"), "a word joiner"),
    row("https://example.com\U000e0041/", blocked("invisible_character"), "a tag character"),
    row("https://exa\ufe0fmple.com/", blocked("malformed_url"), "a variation selector IDNA refuses"),
    row("https://exa\u034fmple.com/", blocked("malformed_url"), "a combining grapheme joiner"),
    row("https://exa\u3164mple.com/", blocked("malformed_url"), "a Hangul filler"),
    # Punycode labels that do not decode, or decode to another name.
    row("https://xn--/", blocked("malformed_url"), "an empty punycode label"),
    row("https://xn--b.example/", blocked("malformed_url"), "an incomplete punycode label"),
    row("https://xn--00a.example/", blocked("malformed_url"), "a punycode label that re-encodes differently"),
    row("https://xn--g6h.example/", ALLOWED, "an IDNA2003 symbol label that round-trips"),
    # Characters that IDNA folds into URL syntax.
    row("https://evil.com／x/", blocked("malformed_url"), "a full-width solidus in the host"),
    row("https://evil＠127.0.0.1/", blocked("ambiguous_ip"), "a full-width @ before loopback"),
    row("https://127.0.0.1＠evil.com/", blocked("malformed_url"), "a full-width @ after loopback"),
    row("https://evil.com：443/", blocked("malformed_url"), "a full-width colon in the host"),
    row("https://ex<ample.com/", blocked("malformed_url"), "an angle bracket in the host"),
]


@pytest.mark.parametrize(("url", "answers", "expected"), URLS)
def test_a_url_gets_the_verdict_of_its_row(url: str, answers: list[str], expected: tuple[str, str]) -> None:
    assert judge(url, answers) == expected


CANONICAL = [
    pytest.param("HTTPS://Example.COM", "https://example.com/", id="scheme and host lower-cased, root path"),
    pytest.param("https://example.com:443/a", "https://example.com/a", id="the default port dropped"),
    pytest.param("https://example.com:0443/a", "https://example.com/a", id="a zero-padded default port"),
    pytest.param("https://example.com:8443/a", "https://example.com:8443/a", id="another port kept"),
    pytest.param("https://example.com/a#b", "https://example.com/a", id="the fragment dropped"),
    pytest.param("https://example.com?q", "https://example.com/?q", id="a query without a path"),
    pytest.param("https://example.com./", "https://example.com/", id="the root dot dropped"),
    pytest.param("https://bücher.example/ä?ö", "https://xn--bcher-kva.example/%C3%A4?%C3%B6", id="IDNA"),
    pytest.param("https://[0:0::0:1]:8443/", "https://[::1]:8443/", id="IPv6 compressed"),
    pytest.param("https://127。0。0。1/", "https://127.0.0.1/", id="ideographic dots folded"),
    pytest.param("https://example.com/@evil.com", "https://example.com/@evil.com", id="@ kept in the path"),
]


@pytest.mark.parametrize(("raw", "canonical"), CANONICAL)
def test_the_canonical_form(raw: str, canonical: str) -> None:
    assert canonical_url(raw) == canonical


def test_a_refused_url_has_no_canonical_form() -> None:
    assert canonical_url("http://example.com/") is None
    assert canonical_url("https://user@example.com/") is None


def test_a_port_is_not_a_host() -> None:
    target = parse_https_url("https://example.com:8443/")
    assert (target.host, target.port, target.address) == ("example.com", 8443, None)


def _reads_as_ipv4(host: str) -> bool:
    """What getaddrinfo would do with the name: inet_aton only parses, it opens nothing."""
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


# Hosts built from what bypasses are made of: numbers in every base, dots of every width, brackets,
# colons, @, percent, backslashes, invisible characters: as soup, as dotted labels, as IPv6 literals.
HOST_ALPHABET = list("0123456789abcdefx.:[]@%/\\?#-_ \t") + list("。．｡１７ｘ\u00ad\u200b：／")
LABELS = st.one_of(
    st.text(alphabet="0123456789abcdefx", min_size=1, max_size=6),
    st.sampled_from(["0x7f", "0177", "127", "255", "256", "１２７", "ｘ", "example", "xn--nxasmq6b"]),
)
DOTTED = st.builds(
    lambda labels, dot, root: dot.join(labels) + root,
    st.lists(LABELS, min_size=1, max_size=5),
    st.sampled_from([".", "。", "．", "｡"]),
    st.sampled_from(["", ".", "。"]),
)
hosts = st.one_of(
    st.text(alphabet=st.sampled_from(HOST_ALPHABET), max_size=24),
    DOTTED,
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
)
urls = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda scheme, host, tail: f"{scheme}://{host}{tail}",
        st.sampled_from(["https", "https", "HTTPS", "http", "https:", "ftp"]),
        hosts,
        st.sampled_from(["", "/", "/p?q#f", ":443/", ":8443", ":0", "@x/", "\\@x"]),
    ),
)


# Pure functions: a slow run on a loaded machine is not a failure.
no_deadline = settings(deadline=None)


@no_deadline
@given(urls)
def test_no_string_crashes_the_checks(url: str) -> None:
    for check in (parse_https_url, lambda raw: check_url(raw, AddressPolicy())):
        with contextlib.suppress(ResearchError):
            check(url)


@no_deadline
@given(urls)
def test_the_canonical_form_is_its_own_canonical_form(url: str) -> None:
    canonical = canonical_url(url)
    if canonical is not None:
        assert canonical_url(canonical) == canonical


@no_deadline
@given(urls)
def test_what_passes_is_what_the_client_will_connect_to(url: str) -> None:
    policy = AddressPolicy()
    try:
        target = check_url(url, policy)
    except ResearchError:
        return
    parsed = yarl.URL(target.url)
    assert (parsed.scheme, parsed.raw_host, parsed.port) == ("https", target.host, target.port)
    assert parsed.host is not None
    if target.address is None:
        with pytest.raises(ValueError, match="does not appear to be"):
            ipaddress.ip_address(target.host)
        assert not _reads_as_ipv4(target.host)
    else:
        assert policy.classify(target.address).allowed


@no_deadline
@given(st.ip_addresses())
def test_an_ip_literal_passes_exactly_when_the_policy_allows_it(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    policy = AddressPolicy()
    verdict = policy.classify(address)
    url = f"https://[{address}]/" if address.version == 6 else f"https://{address}/"
    if verdict.allowed:
        assert check_url(url, policy).address == address
        return
    with pytest.raises(DestinationBlocked) as refused:
        check_url(url, policy)
    assert refused.value.reason == verdict.reason
