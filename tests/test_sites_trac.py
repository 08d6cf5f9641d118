"""The arena's issue tracker (Trac) as the arena uses it: it answers with its styles, a seeded user logs in
through AccountManager's form, a ticket that user files over HTTP is gone after `reset` (which restarts
the server on the same port), and `down` leaves no process behind.

Uses the default sites root, which `make test`'s set-up fills (`awm sites setup --site trac`).
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import re
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.sites import lifecycle
from awm.sites.lifecycle import ServerState
from awm.sites.registry import get_site
from awm.sites.site import Site

pytestmark = pytest.mark.sites

PROBE_SUMMARY = "Probe ticket about quokkaflux calendars"


class Browser:
    """A cookie-keeping HTTP client that posts Trac forms with their form token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[str, str]:
        with self.opener.open(self.base + path, timeout=20) as response:
            return response.geturl(), response.read().decode()

    def post(self, path: str, fields: dict[str, str]) -> tuple[str, str]:
        token = next(c.value for c in self.jar if c.name == "trac_form_token")
        data = urllib.parse.urlencode({**fields, "__FORM_TOKEN": token}).encode()
        with self.opener.open(urllib.request.Request(self.base + path, data=data), timeout=20) as response:
            return response.geturl(), response.read().decode()

    def logged_in_as(self) -> str | None:
        found = re.search(r"logged in as <span[^>]*>([^<]*)</span>", self.get("/")[1])
        return found.group(1) if found else None

    def log_in(self, site: Site, username: str) -> None:
        self.get("/login")
        self.post("/login", {"username": username, "password": site.account(username).password})
        assert self.logged_in_as() == site.account(username).full_name


def probe_tickets(site: Site) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(f"file:{site.database}?mode=ro", uri=True)) as db:
        return db.execute("SELECT id, reporter FROM ticket WHERE summary = ?", (PROBE_SUMMARY,)).fetchall()


@pytest.fixture(scope="module")
def trac() -> Iterator[tuple[Site, ServerState]]:
    site = get_site("trac")
    if not lifecycle.is_seeded(site):
        pytest.fail("the trac site is not set up: run `awm sites setup --site trac`")
    state = lifecycle.up(site)
    yield site, state
    lifecycle.down(site)


def test_the_login_page_answers_with_its_styles(trac: tuple[Site, ServerState]) -> None:
    _, state = trac
    browser = Browser(state.url)
    _, page = browser.get("/login")
    assert 'id="acctmgr_loginform"' in page and 'name="password"' in page
    assert "Larkspur" in page
    _, css = browser.get("/chrome/common/css/trac.css")
    assert len(css) > 10_000


def test_a_ticket_filed_over_http_is_gone_after_reset(trac: tuple[Site, ServerState]) -> None:
    site, state = trac
    frank = Browser(state.url)
    frank.log_in(site, "frank")
    frank.get("/newticket")
    url, _ = frank.post("/newticket", {
        "field_summary": PROBE_SUMMARY, "field_description": "Seen on the demo server.", "field_type": "defect",
        "field_component": "API", "field_priority": "minor", "submit": "Create ticket",
    })  # fmt: skip
    assert url.endswith("/ticket/41")
    assert probe_tickets(site) == [(41, "frank")]

    after = lifecycle.reset(site)

    assert after.port == state.port and after.pid != state.pid  # restarted: Trac caches what it read
    assert probe_tickets(site) == []
    with pytest.raises(urllib.error.HTTPError) as missing:
        Browser(state.url).get("/ticket/41")
    assert missing.value.code == 404
    assert frank.logged_in_as() is None  # the login cookie lived in the restored database
    frank.log_in(site, "frank")


def test_down_leaves_no_process(trac: tuple[Site, ServerState]) -> None:
    site, _ = trac
    assert lifecycle.down(site)
    assert lifecycle.server_state(site) is None
    for proc in Path("/proc").glob("[0-9]*/cmdline"):  # a zombie's cmdline is empty: only live processes
        try:
            command = proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        assert str(site.venv_bin("tracd")) not in command, f"left running: {command}"
