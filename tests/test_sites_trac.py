"""The arena's issue tracker (Trac) as the arena uses it: it answers with its styles, a seeded user logs in
through AccountManager's form, a ticket that user files over HTTP is gone after `reset` (which restarts
the server on the same port), and `down` leaves no process behind.

Uses the default sites root, which `make test`'s set-up fills (`awm sites setup --site trac`).
"""

from __future__ import annotations

import re
import urllib.error
from collections.abc import Iterator

import pytest

from awm.sites import lifecycle
from awm.sites.lifecycle import ServerState
from awm.sites.site import Site
from tests.site_http import FormClient, assert_down_leaves_no_process, read, running_site

pytestmark = pytest.mark.sites

PROBE_SUMMARY = "Probe ticket about quokkaflux calendars"


class Browser(FormClient):
    """Trac's pages over HTTP, with Trac's form token."""

    def __init__(self, base: str) -> None:
        super().__init__(base, "trac_form_token", "__FORM_TOKEN")

    def logged_in_as(self) -> str | None:
        found = re.search(r"logged in as <span[^>]*>([^<]*)</span>", self.get("/")[1])
        return found.group(1) if found else None

    def log_in(self, site: Site, username: str) -> None:
        self.get("/login")
        self.post("/login", {"username": username, "password": site.account(username).password})
        assert self.logged_in_as() == site.account(username).full_name


def probe_tickets(site: Site) -> list[tuple]:
    return read(site, "SELECT id, reporter FROM ticket WHERE summary = ?", PROBE_SUMMARY)


@pytest.fixture(scope="module")
def trac() -> Iterator[tuple[Site, ServerState]]:
    yield from running_site("trac")


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
    assert_down_leaves_no_process(site, str(site.venv_bin("tracd")))
