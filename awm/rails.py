"""Rails for live pages, the pure half: which URLs a live run may open, which requests it may send, which
fields it may fill (DESIGN.md section 9).

Why the checks parse the host themselves: a browser reads `http://2130706433/`, `http://0x7f.1/` and
`http://127.0.0.%31/` as 127.0.0.1, and `http:\\\\localhost` as `http://localhost/`. A check that reads
the URL differently from the browser checks a host other than the one connected to, so the host is taken
the way WHATWG URL parsing takes it for http and https (tab and newline removed, backslash as slash, slashes
after the scheme skipped, percent-decoding, IDNA by UTS 46, the IPv4 number forms, bracketed IPv6), and
anything it cannot read that way is refused rather than guessed at.

Why `publicsuffixlist` for the registrable domain: its wheel ships the Public Suffix List and has no
dependencies, so a verdict never needs the network, and the pinned version is the list the verdicts were
tested with (`tldextract` would fetch the list at run time unless told not to, and pulls in an HTTP client).
A TLD the list does not know (`.test`, `.example`, `.localhost`) is taken as a one-label public suffix, the
list's own default rule `*`: `shop.example.test` is in the site `example.test`.

Name resolution is passed in (`resolve`), so the tests answer from a table and no check here needs DNS.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import idna
from publicsuffixlist import PublicSuffixList
from pydantic import BaseModel, field_validator

from awm.errors import AwmError

Resolver = Callable[[str], list[str]]
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = ("http", "https")
# Refused by name before any lookup: they name this machine or a local network whatever DNS says.
LOCAL_NAMES = ("localhost", "local", "internal", "localdomain")
# Special-purpose IPv4 ranges that `ipaddress.is_global` does not flag in every Python version.
SPECIAL_IPV4 = (
    (ipaddress.IPv4Network("0.0.0.0/8"), "a 'this network' address (0.0.0.0/8)"),
    (ipaddress.IPv4Network("100.64.0.0/10"), "a shared address (100.64.0.0/10, carrier NAT)"),
    (ipaddress.IPv4Network("192.0.0.0/24"), "an IETF protocol address (192.0.0.0/24)"),
    (ipaddress.IPv4Network("198.18.0.0/15"), "a benchmarking address (198.18.0.0/15)"),
    (ipaddress.IPv4Network("240.0.0.0/4"), "a reserved address (240.0.0.0/4)"),
)
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# WHATWG's forbidden domain code points, less the ones the parse has already split on.
FORBIDDEN_IN_HOST = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
C0_OR_SPACE = "".join(chr(c) for c in range(0x21))

PAYMENT_TERMS = tuple("card cvv cvc expiry expiration billing payment credit debit iban".split())
# Ordinary words that merely contain a payment term; they are taken out of a word before matching, so
# "Discard changes" and "cardigan size" pass while "giftcard", "ccCVV" and "prepayment" are refused.
ORDINARY_WORDS = tuple(
    "discard postcard scorecard wildcard placard flashcard cardigan cardinal cardio cardiac cardboard "
    "cardamom accredit discredit".split()
)
FIELD_ATTRIBUTES = ("label", "name", "placeholder", "aria_label", "id")


class RailsError(AwmError):
    """A rails setting is malformed (an --allow-host that is not a host); the message names it."""


class UrlVerdict(BaseModel, frozen=True):
    """Whether a URL may be opened, and why. `host` is the host as the browser reads it (IPv6 unbracketed)."""

    allowed: bool
    reason: str
    host: str = ""
    addresses: list[str] = []
    registrable_domain: str = ""


class FieldInfo(BaseModel, frozen=True):
    """The attributes of a form field that the refusal reads; a missing attribute is the empty string."""

    type: str = ""
    label: str = ""
    name: str = ""
    placeholder: str = ""
    aria_label: str = ""
    id: str = ""

    @field_validator("*", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return "" if value is None else value


@dataclass(frozen=True)
class _Host:
    """A host in canonical form: a lowercase ASCII name without trailing dots, or an IP address."""

    kind: Literal["name", "ipv4", "ipv6"]
    text: str  # the name, or the address as `ipaddress` writes it

    @property
    def address(self) -> IpAddress:
        return ipaddress.ip_address(self.text)


class _BadHost(ValueError):
    """A host the browser would not accept (or that this parse will not vouch for); str is the reason."""


def default_resolver(host: str) -> list[str]:
    """The addresses the system resolver gives for `host`, in its order, without repeats or IPv6 zones."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


def check_url(
    url: str, *, allow_hosts: Iterable[str] = (), resolve: Resolver = default_resolver
) -> UrlVerdict:
    """The verdict on opening `url` in a live run, before any browser starts.

    Refused: a scheme other than http/https, a missing or malformed host, userinfo, a local name, an IP
    literal or a resolved address that is not globally routable, a name that does not resolve.
    `allow_hosts` lists hosts (names or IP literals, any spelling) let through although they would be
    refused; the scheme and userinfo rules still hold for them, and an allowed name is not resolved.
    """
    allowed = _allowed_hosts(allow_hosts)
    try:
        host = _host_of_url(url)
    except _BadHost as exc:
        return UrlVerdict(allowed=False, reason=str(exc))
    domain = _registrable(host)
    refusal, addresses, why = _check_host(host, allowed, resolve)
    return UrlVerdict(
        allowed=refusal is None,
        reason=refusal or why,
        host=host.text,
        addresses=addresses,
        registrable_domain=domain,
    )


def check_request_host(
    host: str,
    *,
    entered: str,
    is_navigation: bool,
    allow_hosts: Iterable[str] = (),
    resolve: Resolver = default_resolver,
) -> str | None:
    """Why the browser must abort a request to `host`, or None to let it through; called for every request.

    The host is resolved again each time (no cache), so a name that was public when the URL was checked
    and points at 127.0.0.1 now (DNS rebinding) is refused. A navigation (the request loads a document:
    the page or a frame) must stay in the registrable domain of `entered`, the host the run started on;
    `allow_hosts` do not relax that. A sub-resource (script, image, font, XHR) may come from another
    site, since pages load them from CDNs and the agent cannot act on them; it is held to the address
    rules only, which are what keep requests off this machine and the local network. A cross-site frame
    counts as a navigation, so an embedded payment or login frame from another site is aborted too.
    """
    allowed = _allowed_hosts(allow_hosts)
    try:
        parsed = _parse_host(host)
        start = _parse_host(entered)
    except _BadHost as exc:
        return str(exc)
    if is_navigation and _registrable(parsed) != _registrable(start):
        return (
            f"navigation to {parsed.text} leaves the site {_registrable(start)} the run started on "
            f"(it is in {_registrable(parsed)})"
        )
    refusal, _, _ = _check_host(parsed, allowed, resolve)
    return refusal


def registrable_domain(host: str) -> str:
    """The site of `host`: its eTLD+1 by the shipped Public Suffix List; an IP literal is its own site.

    A host that is itself a public suffix (`github.io`, `test`) has no eTLD+1 and is its own site, as in
    browsers. Raises RailsError for a host the browser would not accept.
    """
    try:
        return _registrable(_parse_host(host))
    except _BadHost as exc:
        raise RailsError(f"{host!r} is not a host: {exc}") from None


def same_site(url_host: str, entered_host: str) -> bool:
    """Whether two hosts share a registrable domain (`cdn.shop.example.test` and `shop.example.test` do).

    A host that cannot be read is in no site, so it is never the same site as anything.
    """
    try:
        return registrable_domain(url_host) == registrable_domain(entered_host)
    except RailsError:
        return False


def field_refusal(field: FieldInfo) -> str | None:
    """Why the agent must not fill `field`, or None: a password field, or a payment term in its attributes.

    A term refuses a field when it occurs in any word of the label, name, placeholder, aria-label or id,
    words being split at separators and camelCase (`card_number`, `ccCVV`, `billingAddress`, `giftcard`),
    unless it occurs only inside one of ORDINARY_WORDS ("Discard", "cardigan"). A plain word refuses:
    "Card game name" is refused, the price of failing safe; a person can fill such a field.
    """
    if field.type.strip().lower() == "password":
        return "a password field (type=password)"
    found = field_term(field, PAYMENT_TERMS)
    if found is None:
        return None
    attribute, value, word, term = found
    where = "" if word.lower() == term else f" (in {word!r})"
    return f"its {attribute} {value!r} has the payment term {term!r}{where}"


def field_term(field: FieldInfo, terms: Iterable[str]) -> tuple[str, str, str, str] | None:
    """The first of `terms` inside a word of the field's attributes, as (attribute, value, word, term).

    Words as in `field_refusal` (separators, camelCase, ORDINARY_WORDS taken out); the confirmation gate
    asks the same question with its own list of sensitive-field terms.
    """
    wanted = [t.lower() for t in terms if t.strip()]
    for attribute in FIELD_ATTRIBUTES:
        value = getattr(field, attribute)
        for word in words_of(value):
            rest = word.lower()
            for ordinary in ORDINARY_WORDS:
                rest = rest.replace(ordinary, " ")
            for term in wanted:
                if term in rest:
                    return attribute.replace("_", "-"), value, word, term
    return None


def words_of(text: str) -> list[str]:
    """Split at anything not a letter or digit and at camelCase humps: `ccCVVCode` -> cc, CVV, Code."""
    humped = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return [w for w in re.split(r"[\W_]+", humped) if w]


def _check_host(host: _Host, allowed: frozenset[str], resolve: Resolver) -> tuple[str | None, list[str], str]:
    """(refusal or None, addresses, why allowed) for a canonical host under the address and name rules."""
    if host.text in allowed:
        return None, [], f"{host.text} is allowed by --allow-host"
    if host.kind != "name":
        problem = _non_global(host.address)
        if problem:
            return f"{host.text} is {problem}", [host.text], ""
        return None, [host.text], f"{host.text} is a public address"
    labels = host.text.split(".")
    if labels[-1] in LOCAL_NAMES:
        return f"{host.text} is a local name (.{labels[-1]}), refused before any lookup", [], ""
    try:
        answers = resolve(host.text)
    except (OSError, UnicodeError) as exc:
        return f"{host.text} does not resolve ({exc}); a name that cannot be checked is refused", [], ""
    if not answers:
        return f"{host.text} resolves to no address", [], ""
    addresses: list[str] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer.split("%")[0])
        except ValueError:
            return f"{host.text} resolves to {answer!r}, which is not an IP address", addresses, ""
        addresses.append(str(address))
        problem = _non_global(address)
        if problem:
            return f"{host.text} resolves to {address}, {problem}", addresses, ""
    return None, addresses, f"{host.text} resolves to public addresses only ({', '.join(addresses)})"


def _non_global(address: IpAddress) -> str | None:
    """What makes `address` unfit for a live run ("a loopback address"...), or None if it is globally routable."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            inner = _non_global(address.ipv4_mapped)
            return f"{inner} (IPv4-mapped {address.ipv4_mapped})" if inner else None
        if address in NAT64:  # DNS64 answers for IPv4-only sites; the IPv4 address is what is reached
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            inner = _non_global(embedded)
            return f"{inner} (NAT64 of {embedded})" if inner else None
        for embedded in (address.sixtofour, *(address.teredo or ())):
            inner = _non_global(embedded) if embedded is not None else None
            if inner:
                return f"an address that embeds {embedded}, {inner}"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address):
        for network, what in SPECIAL_IPV4:
            if address in network:
                return what
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "a site-local address"
    if address.is_private:
        return "a private or special-purpose address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "an address that is not globally routable"
    return None


def _registrable(host: _Host) -> str:
    if host.kind != "name":
        return host.text
    return _suffix_list().privatesuffix(host.text) or host.text


@functools.cache
def _suffix_list() -> PublicSuffixList:
    """The list shipped in the pinned wheel (parsed once, about 30 ms); never fetched."""
    return PublicSuffixList()


def _allowed_hosts(allow_hosts: Iterable[str]) -> frozenset[str]:
    """Canonical forms of the allowed hosts, so `[::1]`, `::1` and `LOCALHOST.` match as the browser reads them."""
    canonical = set()
    for entry in allow_hosts:
        try:
            canonical.add(_parse_host(entry.strip()).text)
        except _BadHost as exc:
            why = "a scheme or port is not part of a host" if "/" in entry or entry.count(":") == 1 else exc
            raise RailsError(
                f"--allow-host {entry!r} is not a host name or IP literal ({why}); give the host alone, "
                "e.g. --allow-host 127.0.0.1"
            ) from None
    return frozenset(canonical)


def _host_of_url(url: str) -> _Host:
    """The host of an http(s) URL as the browser reads it; _BadHost says why the URL is refused."""
    text = re.sub(r"[\t\n\r]", "", url.strip(C0_OR_SPACE))
    scheme_match = SCHEME.match(text)
    if not scheme_match:
        raise _BadHost(f"{url!r} has no scheme; give a full URL such as https://example.com/")
    scheme = scheme_match.group(1).lower()
    if scheme not in ALLOWED_SCHEMES:
        raise _BadHost(f"the scheme {scheme}: is refused; only http and https pages may be opened")
    rest = text[scheme_match.end() :].replace("\\", "/").lstrip("/")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise _BadHost(
            "the URL has userinfo (user@ before the host); refused because the host a person reads "
            "is not the host the browser connects to"
        )
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _BadHost("an IPv6 host has no closing ]")
        raw_host, after = authority[: end + 1], authority[end + 1 :]
        if after and not after.startswith(":"):
            raise _BadHost(f"{after!r} follows the IPv6 host; only :port may")
        port = after[1:]
    else:
        raw_host, _, port = authority.partition(":")
    if not re.fullmatch(r"[0-9]*", port) or (port and int(port) > 65535):
        raise _BadHost(f"the port {port!r} is not a number from 0 to 65535")
    if not raw_host:
        raise _BadHost("the URL has no host")
    return _parse_host(raw_host)


def _parse_host(raw: str) -> _Host:
    """A host in canonical form. IPv6 may be bracketed or not (a URL's host has no other colon)."""
    if raw.startswith("[") or ":" in raw:
        inner = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw
        if raw.startswith("[") != raw.endswith("]") or "%" in inner:
            raise _BadHost(f"{raw!r} is not an IPv6 literal")
        try:
            return _Host(kind="ipv6", text=str(ipaddress.IPv6Address(inner)))
        except ValueError:
            raise _BadHost(f"{raw!r} is not an IPv6 literal") from None
    name = _ascii_name(_percent_decode(raw))
    if FORBIDDEN_IN_HOST.search(name):
        raise _BadHost(f"the host {name!r} has a character no host may have")
    if _ends_in_number(name):
        return _Host(kind="ipv4", text=str(_parse_ipv4(name)))
    name = name.rstrip(".")
    if not name:
        raise _BadHost("the URL has no host")
    return _Host(kind="name", text=name)


def _percent_decode(raw: str) -> str:
    if "%" not in raw:
        return raw
    data = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw.encode("utf-8"))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _BadHost(f"the host {raw!r} percent-decodes to bytes that are not UTF-8") from None


def _ascii_name(host: str) -> str:
    """IDNA by UTS 46 as browsers do it (`münchen.de` -> `xn--mnchen-3ya.de`, full-width digits to ASCII).

    An ASCII host is only lowercased (browsers accept `my_host`, which the IDNA 2008 checks reject), but
    its `xn--` labels must decode, as the browser checks them too.
    """
    if host.isascii():
        lowered = host.lower()
        for label in lowered.split("."):
            if label.startswith("xn--"):
                try:
                    idna.decode(label)
                except idna.IDNAError as exc:
                    raise _BadHost(f"the host label {label!r} is not valid IDNA ({exc})") from None
        return lowered
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError as exc:
        raise _BadHost(f"the host {host!r} is not a valid internationalised name ({exc})") from None


def _ends_in_number(name: str) -> bool:
    """WHATWG's test for a host the IPv4 parser takes: the last label is decimal digits or 0x-hex."""
    labels = name.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    return re.fullmatch(r"[0-9]+", last) is not None or re.fullmatch(r"0[xX][0-9A-Fa-f]*", last) is not None


def _parse_ipv4(name: str) -> ipaddress.IPv4Address:
    """WHATWG's IPv4 parser: up to 4 parts, each decimal, 0x hex or 0-led octal; the last fills the rest."""
    parts = name.split(".")
    if parts[-1] == "":
        parts.pop()
    if len(parts) > 4:
        raise _BadHost(f"the host {name!r} ends in a number but is not an IPv4 address (too many parts)")
    numbers = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            raise _BadHost(f"the host {name!r} ends in a number but {part!r} is not an IPv4 number")
        numbers.append(number)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise _BadHost(f"the host {name!r} is out of the IPv4 range")
    value = numbers[-1]
    for i, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - i)
    return ipaddress.IPv4Address(value)


def _ipv4_number(part: str) -> int | None:
    if part == "":
        return None
    radix, digits = 10, part
    if part[:2] in ("0x", "0X"):
        radix, digits = 16, part[2:]
    elif len(part) > 1 and part[0] == "0":
        radix, digits = 8, part[1:]
    if digits == "":
        return 0
    allowed = {10: "0123456789", 16: "0123456789abcdefABCDEF", 8: "01234567"}[radix]
    if any(c not in allowed for c in digits):
        return None
    return int(digits, radix)
