"""The pure rails for live pages: URL verdicts in every spelling a browser accepts, the request-time host
check (DNS rebinding, leaving the site), registrable domains, field refusals, and `awm rails check`.

Every name is answered by a table (`FakeResolver`), so nothing here touches DNS or the network; the
public address used, 93.184.216.34, is never contacted.
"""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from awm.cli import app
from awm.rails import (
    FieldInfo,
    RailsError,
    check_request_host,
    check_url,
    field_refusal,
    registrable_domain,
    same_site,
)

PUBLIC = "93.184.216.34"
PUBLIC6 = "2606:2800:220:1:248:1893:25c8:1946"


class FakeResolver:
    """Answers from a dict; a name not in it does not resolve. Records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def __call__(self, host: str) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


def no_dns(host: str) -> list[str]:
    raise AssertionError(f"{host} was looked up; this check must decide without DNS")


def resolver() -> FakeResolver:
    return FakeResolver(
        {
            "shop.example.test": [PUBLIC],
            "cdn.shop.example.test": [PUBLIC],
            "dual.example.test": [PUBLIC, PUBLIC6],
            "v6.example.test": [PUBLIC6],
            "mixed.example.test": [PUBLIC, "10.0.0.7"],
            "inside.example.test": ["192.168.1.20"],
            "mapped.example.test": ["::ffff:127.0.0.1"],
            "scoped.example.test": ["fe80::1%eth0"],
            "empty.example.test": [],
            "garbage.example.test": ["not-an-address"],
            "xn--mnchen-3ya.test": [PUBLIC],
            "my_host.example.test": [PUBLIC],
            "example.test": [PUBLIC],
        }
    )


# (url, allowed, substring of the reason)
URLS = [
    # allowed
    ("https://shop.example.test/", True, "public addresses only (93.184.216.34)"),
    ("HTTP://SHOP.Example.Test/cart?x=1#top", True, "shop.example.test resolves"),
    ("https://shop.example.test.:8443/", True, "public addresses"),
    ("http://dual.example.test/", True, PUBLIC6),
    ("http://v6.example.test/", True, "public addresses"),
    (f"http://{PUBLIC}:8080/", True, f"{PUBLIC} is a public address"),
    (f"http://[{PUBLIC6}]/", True, "is a public address"),
    ("http://1572395042/", True, f"{PUBLIC} is a public address"),  # 93.184.216.34 as one number
    ("http://münchen.test/", True, "xn--mnchen-3ya.test resolves"),
    ("http://my_host.example.test/", True, "public addresses"),
    ("  https://shop.example.test/\n", True, "public addresses"),
    ("http:shop.example.test", True, "public addresses"),  # browsers read this as http://shop.example.test/
    ("http://[64:ff9b::5db8:d822]/", True, "public address"),  # NAT64 of 93.184.216.34
    # schemes
    ("file:///etc/passwd", False, "scheme file:"),
    ("javascript:alert(1)", False, "scheme javascript:"),
    ("data:text/html,<b>hi</b>", False, "scheme data:"),
    ("chrome://settings", False, "scheme chrome:"),
    ("about:blank", False, "scheme about:"),
    ("ftp://shop.example.test/", False, "scheme ftp:"),
    ("blob:https://shop.example.test/uuid", False, "scheme blob:"),
    ("view-source:https://shop.example.test/", False, "scheme view-source:"),
    ("JavaScript:alert(1)", False, "scheme javascript:"),
    ("shop.example.test/", False, "no scheme"),
    # host, userinfo, port
    ("http://", False, "no host"),
    ("http:///", False, "no host"),
    ("http://a@127.0.0.1/", False, "userinfo"),
    ("http://shop.example.test@127.0.0.1/", False, "host a person reads"),
    ("http://user:pw@shop.example.test/", False, "userinfo"),
    ("http://127.0.0.1\\@shop.example.test/", False, "loopback"),  # backslash ends the host, as in browsers
    ("http://shop.example.test:99999/", False, "port '99999'"),
    ("http://shop.example.test:8o/", False, "port"),
    ("http://sh op.example.test/", False, "character no host may have"),
    ("http://shop.example.test%2f@x/", False, "userinfo"),
    # local names, before any lookup
    ("http://localhost/", False, "local name"),
    ("http://localhost.:8000/", False, "local name"),
    ("http://LOCALHOST/", False, "local name"),
    ("http://app.localhost/", False, "local name (.localhost)"),
    ("http://printer.local/", False, "local name (.local)"),
    ("http://db.internal/", False, "local name (.internal)"),
    ("http://box.localdomain/", False, "local name (.localdomain)"),
    ("http://%6c%6f%63%61%6c%68%6f%73%74/", False, "local name"),  # percent-encoded "localhost"
    ("http://ＬＯＣＡＬＨＯＳＴ/", False, "local name"),  # full-width letters map to "localhost"
    # IPv4 in every spelling
    ("http://127.0.0.1/", False, "127.0.0.1 is a loopback address"),
    ("http://127.0.0.1./", False, "loopback"),
    ("http://2130706433/", False, "127.0.0.1 is a loopback"),
    ("http://0x7f000001/", False, "127.0.0.1 is a loopback"),
    ("http://0x7F.1/", False, "127.0.0.1 is a loopback"),
    ("http://0177.0.0.1/", False, "127.0.0.1 is a loopback"),
    ("http://0177.1/", False, "127.0.0.1 is a loopback"),
    ("http://127.1/", False, "127.0.0.1 is a loopback"),
    ("http://127.0.1/", False, "127.0.0.1 is a loopback"),
    ("http://127.0.0.%31/", False, "127.0.0.1 is a loopback"),
    ("http://１２７.０.０.１/", False, "127.0.0.1 is a loopback"),  # full-width digits
    ("http:\\\\127.0.0.1\\", False, "127.0.0.1 is a loopback"),
    ("http://10.1/", False, "10.0.0.1 is a private"),
    ("http://10.0.0.1/", False, "private"),
    ("http://172.16.5.4/", False, "private"),
    ("http://192.168.0.1/", False, "private"),
    ("http://169.254.169.254/latest/meta-data/", False, "link-local"),
    ("http://0.0.0.0/", False, "unspecified"),
    ("http://0/", False, "0.0.0.0 is the unspecified"),
    ("http://0.1.2.3/", False, "'this network'"),
    ("http://100.64.0.1/", False, "shared address"),
    ("http://224.0.0.1/", False, "multicast"),
    ("http://240.0.0.1/", False, "reserved"),
    ("http://255.255.255.255/", False, "255.255.255.255 is a"),
    ("http://198.18.0.1/", False, "benchmarking"),
    ("http://192.0.2.1/", False, "special-purpose"),  # documentation range
    ("http://256.0.0.1/", False, "out of the IPv4 range"),
    ("http://1.2.3.4.5/", False, "too many parts"),
    ("http://0x100000000/", False, "out of the IPv4 range"),
    ("http://09.0.0.1/", False, "not an IPv4 number"),  # 0-led is octal, and 9 is no octal digit
    ("http://shop.1/", False, "not an IPv4 number"),  # ends in a number, so browsers refuse it too
    # IPv6
    ("http://[::1]/", False, "::1 is a loopback"),
    ("http://[::1]:8000/", False, "loopback"),
    ("http://[::]/", False, "unspecified"),
    ("http://[::ffff:127.0.0.1]/", False, "loopback address (IPv4-mapped 127.0.0.1)"),
    ("http://[::ffff:7f00:1]/", False, "IPv4-mapped 127.0.0.1"),
    ("http://[::ffff:10.0.0.1]/", False, "private or special-purpose address (IPv4-mapped 10.0.0.1)"),
    ("http://[::ffff:169.254.169.254]/", False, "link-local"),
    ("http://[fe80::1]/", False, "link-local"),
    ("http://[fe80::1%25eth0]/", False, "not an IPv6 literal"),
    ("http://[fc00::1]/", False, "private"),
    ("http://[fec0::1]/", False, "site-local"),
    ("http://[ff02::1]/", False, "multicast"),
    ("http://[2002:7f00:1::]/", False, "embeds 127.0.0.1"),  # 6to4 of 127.0.0.1
    ("http://[64:ff9b::7f00:1]/", False, "NAT64 of 127.0.0.1"),
    ("http://[::1/", False, "no closing ]"),
    ("http://[::1]x/", False, "only :port may"),
    ("http://[not:an:address]/", False, "not an IPv6 literal"),
    # names: what they resolve to
    ("http://inside.example.test/", False, "resolves to 192.168.1.20, a private"),
    ("http://mixed.example.test/", False, "resolves to 10.0.0.7"),  # ANY non-global address refuses
    ("http://mapped.example.test/", False, "IPv4-mapped 127.0.0.1"),
    ("http://scoped.example.test/", False, "link-local"),
    ("http://nowhere.example.test/", False, "does not resolve"),
    ("http://empty.example.test/", False, "resolves to no address"),
    ("http://garbage.example.test/", False, "not an IP address"),
    ("http://xn--zz.test/", False, "not valid IDNA"),
]


@pytest.mark.parametrize(("url", "allowed", "reason"), URLS, ids=[u for u, _, _ in URLS])
def test_check_url(url: str, allowed: bool, reason: str) -> None:
    verdict = check_url(url, resolve=resolver())
    assert verdict.allowed is allowed, verdict.reason
    assert reason in verdict.reason


def test_the_table_is_wide() -> None:
    assert len(URLS) >= 40
    assert sum(allowed for _, allowed, _ in URLS) >= 10


def test_a_verdict_names_the_host_addresses_and_site() -> None:
    verdict = check_url("https://Cdn.Shop.Example.Test./x", resolve=resolver())
    assert verdict.allowed
    assert verdict.host == "cdn.shop.example.test"
    assert verdict.addresses == [PUBLIC]
    assert verdict.registrable_domain == "example.test"
    literal = check_url("http://0x7f.1/", resolve=resolver())
    assert (literal.host, literal.addresses, literal.registrable_domain) == (
        "127.0.0.1",
        ["127.0.0.1"],
        "127.0.0.1",
    )
    refused = check_url("javascript:alert(1)", resolve=resolver())
    assert (refused.host, refused.addresses, refused.registrable_domain) == ("", [], "")


def test_local_names_and_literals_are_refused_without_a_lookup() -> None:
    for url in (
        "http://localhost/",
        "http://printer.local/",
        "http://2130706433/",
        "http://[::1]/",
        "file:///x",
    ):
        assert not check_url(url, resolve=no_dns).allowed
    resolve = resolver()
    check_url("http://shop.example.test./", resolve=resolve)
    assert resolve.asked == ["shop.example.test"]  # the trailing dot is gone before the lookup


def test_allow_hosts_let_through_exactly_the_named_host() -> None:
    resolve = resolver()
    allow = ["127.0.0.1"]
    assert check_url("http://127.0.0.1:8000/", allow_hosts=allow, resolve=resolve).allowed
    # the same address in another spelling is the same host to the browser
    assert check_url("http://2130706433/", allow_hosts=allow, resolve=resolve).allowed
    assert not check_url("http://127.0.0.2/", allow_hosts=allow, resolve=resolve).allowed
    assert not check_url("http://localhost/", allow_hosts=allow, resolve=resolve).allowed
    assert not check_url("http://[::1]/", allow_hosts=allow, resolve=resolve).allowed
    # an allowed host still needs http(s) and no userinfo
    assert not check_url("ftp://127.0.0.1/", allow_hosts=allow, resolve=resolve).allowed
    assert not check_url("http://x@127.0.0.1/", allow_hosts=allow, resolve=resolve).allowed
    assert resolve.asked == []
    verdict = check_url("http://127.0.0.1/", allow_hosts=allow, resolve=resolve)
    assert verdict.reason == "127.0.0.1 is allowed by --allow-host"


def test_allow_hosts_are_read_as_hosts() -> None:
    resolve = resolver()
    assert check_url("http://[::1]:8000/", allow_hosts=["[::1]"], resolve=resolve).allowed
    assert check_url("http://[::1]/", allow_hosts=["::1"], resolve=resolve).allowed
    assert check_url("http://localhost:8000/", allow_hosts=["LOCALHOST."], resolve=resolve).allowed
    assert not check_url("http://app.localhost/", allow_hosts=["localhost"], resolve=resolve).allowed
    assert resolve.asked == []  # an allowed name is not resolved
    for bad in ("127.0.0.1:8000", "http://127.0.0.1", "a b"):
        with pytest.raises(RailsError, match="--allow-host"):
            check_url("http://127.0.0.1/", allow_hosts=[bad], resolve=resolve)


def test_dns_rebinding_is_caught_at_request_time() -> None:
    answers = iter([[PUBLIC], ["127.0.0.1"]])
    asked: list[str] = []

    def rebinding(host: str) -> list[str]:
        asked.append(host)
        return next(answers)

    verdict = check_url("http://shop.example.test/", resolve=rebinding)
    assert verdict.allowed
    refusal = check_request_host(
        "shop.example.test", entered=verdict.host, is_navigation=True, resolve=rebinding
    )
    assert refusal is not None and "resolves to 127.0.0.1, a loopback address" in refusal
    assert asked == ["shop.example.test", "shop.example.test"]  # resolved again, not cached


def test_navigation_stays_on_the_entered_site() -> None:
    resolve = resolver()
    entered = "shop.example.test"
    assert (
        check_request_host("shop.example.test", entered=entered, is_navigation=True, resolve=resolve) is None
    )
    assert (
        check_request_host("cdn.shop.example.test", entered=entered, is_navigation=True, resolve=resolve)
        is None
    )
    assert check_request_host("example.test", entered=entered, is_navigation=True, resolve=resolve) is None
    refusal = check_request_host("v6.other.test", entered=entered, is_navigation=True, resolve=resolve)
    assert refusal is not None and "leaves the site example.test" in refusal and "other.test" in refusal


def test_sub_resources_may_come_from_other_public_sites_only() -> None:
    resolve = FakeResolver(
        {"cdn.other.test": [PUBLIC], "shop.example.test": [PUBLIC], "evil.test": ["10.1.1.1"]}
    )
    entered = "shop.example.test"
    assert check_request_host("cdn.other.test", entered=entered, is_navigation=False, resolve=resolve) is None
    refusal = check_request_host("evil.test", entered=entered, is_navigation=False, resolve=resolve)
    assert refusal is not None and "10.1.1.1" in refusal
    assert "loopback" in (
        check_request_host("127.0.0.1", entered=entered, is_navigation=False, resolve=no_dns) or ""
    )
    assert "local name" in (
        check_request_host("localhost", entered=entered, is_navigation=False, resolve=no_dns) or ""
    )
    assert "does not resolve" in (
        check_request_host("gone.test", entered=entered, is_navigation=False, resolve=resolve) or ""
    )


def test_request_hosts_under_allow_hosts() -> None:
    def check(host: str, *, is_navigation: bool, allow: list[str]) -> str | None:
        return check_request_host(
            host, entered="127.0.0.1", is_navigation=is_navigation, allow_hosts=allow, resolve=no_dns
        )

    assert check("127.0.0.1", is_navigation=True, allow=["127.0.0.1"]) is None
    assert check("[::1]", is_navigation=False, allow=["::1"]) is None
    # allow_hosts relax the address rules, never the site rule
    refusal = check("localhost", is_navigation=True, allow=["localhost"])
    assert refusal is not None and "leaves the site 127.0.0.1" in refusal
    assert "loopback" in (check("127.0.0.2", is_navigation=False, allow=["127.0.0.1"]) or "")
    assert "character no host may have" in (check("sh op.test", is_navigation=False, allow=[]) or "")


@pytest.mark.parametrize(
    ("host", "site"),
    [
        ("shop.example.test", "example.test"),  # .test is not in the list: a one-label suffix (rule "*")
        ("cdn.shop.example.test", "example.test"),
        ("example.test", "example.test"),
        ("test", "test"),  # a public suffix itself is its own site
        ("Shop.Example.Test.", "example.test"),
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("co.uk", "co.uk"),
        ("alice.github.io", "alice.github.io"),  # the list's private section counts, as in browsers
        ("münchen.de", "xn--mnchen-3ya.de"),
        ("a.b.xn--mnchen-3ya.de", "xn--mnchen-3ya.de"),
        ("127.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:7f00:1"),
    ],
)
def test_registrable_domain(host: str, site: str) -> None:
    assert registrable_domain(host) == site


def test_registrable_domain_refuses_what_is_not_a_host() -> None:
    with pytest.raises(RailsError, match="not a host"):
        registrable_domain("a b.test")


def test_same_site() -> None:
    assert same_site("cdn.shop.example.test", "shop.example.test")
    assert same_site("shop.example.test", "shop.example.test")
    assert same_site("example.test", "shop.example.test")
    assert not same_site("other.test", "shop.example.test")
    assert not same_site("alice.github.io", "bob.github.io")
    assert not same_site("127.0.0.2", "127.0.0.1")
    assert same_site("2130706433", "127.0.0.1")
    assert not same_site("localhost", "127.0.0.1")
    assert not same_site("a b", "a b")


ATTRIBUTES = ("label", "name", "placeholder", "aria_label", "id")
TERMS = ("card", "cvv", "cvc", "expiry", "expiration", "billing", "payment", "credit", "debit", "iban")


@pytest.mark.parametrize("attribute", ATTRIBUTES)
@pytest.mark.parametrize("term", TERMS)
def test_each_payment_term_in_each_attribute_refuses(attribute: str, term: str) -> None:
    for value in (term, term.upper(), f"your_{term}_here", f"my{term.capitalize()}Field"):
        refusal = field_refusal(FieldInfo(type="text", **{attribute: value}))
        assert refusal is not None, value
        assert repr(term) in refusal and attribute.replace("_", "-") in refusal and repr(value) in refusal


@pytest.mark.parametrize(
    ("field", "says"),
    [
        (FieldInfo(type="password", name="pw"), "password field"),
        (FieldInfo(type=" PASSWORD ", label="Secret"), "password field"),
        (FieldInfo(name="card_number"), "name 'card_number' has the payment term 'card'"),
        (FieldInfo(id="ccCVV"), "id 'ccCVV' has the payment term 'cvv'"),
        (FieldInfo(name="CVVCode"), "'cvv'"),
        (
            FieldInfo(aria_label="billingAddress"),
            "aria-label 'billingAddress' has the payment term 'billing'",
        ),
        (FieldInfo(placeholder="Card expiry (MM/YY)"), "'card'"),
        (FieldInfo(name="cc-exp-expiration"), "'expiration'"),
        (FieldInfo(name="giftcard"), "'card' (in 'giftcard')"),  # inside a word refuses
        (FieldInfo(name="creditCardNumber"), "'credit'"),
        (FieldInfo(id="ccexpiry"), "'expiry' (in 'ccexpiry')"),
        (FieldInfo(label="Prepayment amount"), "'payment'"),
        (FieldInfo(label="IBAN"), "'iban'"),
        (FieldInfo(label="Card game name"), "label 'Card game name' has the payment term 'card'"),
        (FieldInfo(label="Discard card"), "'card'"),  # an ordinary word does not hide a real term
    ],
)
def test_refused_fields(field: FieldInfo, says: str) -> None:
    refusal = field_refusal(field)
    assert refusal is not None and says in refusal, refusal


@pytest.mark.parametrize(
    "field",
    [
        FieldInfo(type="text", label="Search", name="q", placeholder="Search products", id="search"),
        FieldInfo(type="email", label="Email address", name="email"),
        FieldInfo(label="Discard changes?"),  # 'card' only inside the ordinary word "discard"
        FieldInfo(name="postcardMessage"),
        FieldInfo(label="Cardigan size"),
        FieldInfo(label="Scorecard notes"),
        FieldInfo(label="Wildcard pattern"),
        FieldInfo(label="Accredited institution"),
        FieldInfo(type="text", label=None, name=None),  # missing attributes read as empty
        FieldInfo(type="passwordless", label="Username"),  # only type=password is a password field
    ],
)
def test_fields_that_pass(field: FieldInfo) -> None:
    assert field_refusal(field) is None


runner = CliRunner()


@pytest.fixture
def no_system_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command uses the system resolver; these URLs must be decided without it."""
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: no_dns(str(a[0])))


def test_cli_allows_an_allowed_literal(no_system_dns: None) -> None:
    result = runner.invoke(app, ["rails", "check", "http://127.0.0.1:8000/x", "--allow-host", "127.0.0.1"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "allowed: http://127.0.0.1:8000/x (127.0.0.1 is allowed by --allow-host)"


def test_cli_refuses_with_the_reason_and_exit_2(no_system_dns: None) -> None:
    result = runner.invoke(app, ["rails", "check", "http://0x7f.1/", "--allow-host", "127.0.0.2"])
    assert result.exit_code == 2
    assert result.output.strip() == "refused: http://0x7f.1/: 127.0.0.1 is a loopback address"
    result = runner.invoke(app, ["rails", "check", "file:///etc/passwd"])
    assert result.exit_code == 2
    assert "refused: file:///etc/passwd: the scheme file: is refused" in result.output


def test_cli_bad_allow_host_is_a_user_error(no_system_dns: None) -> None:
    result = runner.invoke(app, ["rails", "check", "http://127.0.0.1/", "--allow-host", "127.0.0.1:80"])
    assert isinstance(result.exception, RailsError)  # awm.cli.main prints it and exits 2
    assert RailsError.exit_code == 2
