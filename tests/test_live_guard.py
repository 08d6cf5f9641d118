"""The route guard in real Chromium, on made-up host names that are never resolved.

A Playwright route answers `shop.example.test`, `cdn.shop.example.test` and `other.test` from the files in
tests/fixtures/guard, and the guard's resolver answers from a table, so no name reaches DNS and no request
leaves the machine. The guard is installed after the fixture route, so it sees every request first (as
it sees the network's in a live run) and lets an allowed one fall back to the fixture route.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from awm.config import RailsSettings
from awm.gate import DenyGate
from awm.webarena.guard import LiveRails

pytestmark = pytest.mark.browser

GUARD_PAGES = Path(__file__).parent / "fixtures" / "guard"
PUBLIC = "93.184.216.34"  # a globally routable address; nothing ever connects to it
FILES = {
    ("shop.example.test", "/shop.html"): "shop.html",
    ("cdn.shop.example.test", "/help.html"): "help.html",
    ("cdn.shop.example.test", "/app.js"): "app.js",
    ("other.test", "/page.html"): "page.html",
}
TYPES = {".html": "text/html", ".js": "application/javascript"}


class Resolver:
    """A DNS table for the made-up names; `rebind` makes a name answer 127.0.0.1 after its first lookup."""

    def __init__(self, rebind: str = "") -> None:
        self.rebind = rebind
        self.lookups: list[str] = []

    def __call__(self, host: str) -> list[str]:
        self.lookups.append(host)
        if host == self.rebind and self.lookups.count(host) > 1:
            return ["127.0.0.1"]
        return [PUBLIC]


def serve_fixtures(served: list[str]) -> Any:
    """The route that plays the three sites: fixture files by (host, path); a 1x1 PNG for images."""

    def handler(route: Any, request: Any) -> None:
        parts = urlsplit(request.url)
        served.append(f"{parts.hostname}{parts.path}")
        name = FILES.get((parts.hostname or "", parts.path))
        if name is not None:
            route.fulfill(status=200, content_type=TYPES[Path(name).suffix], body=(GUARD_PAGES / name).read_bytes())
        elif parts.path.endswith(".png"):
            route.fulfill(status=200, content_type="image/png", body=b"\x89PNG\r\n\x1a\n")
        else:
            route.fulfill(status=404, body="not here")

    return handler


def open_shop(chromium: Any, resolver: Resolver) -> tuple[LiveRails, Any, list[str]]:
    rails = LiveRails("http://shop.example.test/shop.html", RailsSettings(), DenyGate(), resolve=resolver)
    context = chromium.new_context(accept_downloads=False)
    served: list[str] = []
    context.route("**/*", serve_fixtures(served))
    rails.guard.install(context)  # registered last, so it runs first
    page = context.new_page()
    return rails, page, served


def test_subdomain_allowed_and_off_site_navigation_aborted_and_reported(chromium: Any) -> None:
    resolver = Resolver()
    rails, page, served = open_shop(chromium, resolver)
    page.goto("http://shop.example.test/shop.html")
    assert page.locator("#script-status").inner_text() == "script loaded"  # cdn.shop.example.test: same site
    assert "other.test/pixel.png" in served  # a cross-site image: a sub-resource, held to the address rules
    assert rails.stop_reason(page.url) is None

    page.click("#sub")
    page.wait_for_load_state()
    assert urlsplit(page.url).hostname == "cdn.shop.example.test"
    assert page.locator("h1").inner_text() == "Help centre"
    assert rails.stop_reason(page.url) is None
    page.go_back()
    page.wait_for_load_state()

    page.click("#off")
    page.wait_for_timeout(300)
    assert "other.test/page.html" not in served  # the navigation never reached the 'network'
    blocked = [b for b in rails.guard.blocked if b.host == "other.test" and b.navigation]
    assert blocked and blocked[0].main_frame
    assert "leaves the site example.test" in blocked[0].reason
    stop = rails.stop_reason(page.url)
    assert stop is not None and "example.test" in stop and "other.test" in stop
    assert rails.record()["blocked_hosts"] == ["other.test"]
    # A navigation off the site is refused on its name: other.test was never looked up for it.
    assert resolver.lookups.count("other.test") == served.count("other.test/pixel.png")  # the images' only
    page.context.close()


def test_dns_rebinding_is_blocked_at_request_time(chromium: Any) -> None:
    """shop.example.test is public when the URL is checked and 127.0.0.1 when the page is requested."""
    resolver = Resolver(rebind="shop.example.test")
    rails, page, served = open_shop(chromium, resolver)
    with pytest.raises(Exception, match="ERR_BLOCKED_BY_CLIENT"):
        page.goto("http://shop.example.test/shop.html")
    assert served == []
    reason = rails.guard.blocked[0].reason
    assert "shop.example.test resolves to 127.0.0.1" in reason and "loopback" in reason
    assert rails.stop_reason(page.url) is not None
    page.context.close()


def test_goto_off_site_is_refused_before_any_request() -> None:
    rails = LiveRails("http://shop.example.test/", RailsSettings(), DenyGate(), resolve=Resolver())
    assert rails.goto_refusal("http://cdn.shop.example.test/help.html") is None
    assert "would leave example.test" in (rails.goto_refusal("https://other.test/") or "")
    assert "not an http(s) URL" in (rails.goto_refusal("file:///etc/passwd") or "")
