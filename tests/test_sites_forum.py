"""The arena's forum (Spirit) as the arena uses it: it answers, a seeded user logs in through Spirit's own
form, what that user posts over HTTP (a topic, with its search index entry) is gone after `reset`
without a restart, and `down` leaves no process behind.

Uses the default sites root, which `make test`'s set-up fills (`awm sites setup --site forum`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from awm.sites import lifecycle
from awm.sites.lifecycle import ServerState
from awm.sites.site import Site
from tests.site_http import FormClient, assert_down_leaves_no_process, read, running_site

pytestmark = pytest.mark.sites

PROBE_TITLE = "Probe topic about quokkaflux cables"


class Browser(FormClient):
    """Spirit's pages over HTTP, with Django's CSRF token."""

    def __init__(self, base: str) -> None:
        super().__init__(base, "csrftoken", "csrfmiddlewaretoken")

    def log_in(self, site: Site, username: str) -> None:
        self.get("/user/login/")
        url, page = self.post(
            "/user/login/", {"username": username, "password": site.account(username).password}
        )
        assert url.endswith("/user/"), f"login as {username} did not land on the profile page: {url}"
        assert "/user/logout/" in page


def probe_topics(site: Site) -> list[tuple]:
    return read(site, "SELECT id, title FROM spirit_topic_topic WHERE title = ?", PROBE_TITLE)


@pytest.fixture(scope="module")
def forum() -> Iterator[tuple[Site, ServerState]]:
    yield from running_site("forum")


def test_the_login_page_answers_with_its_styles(forum: tuple[Site, ServerState]) -> None:
    _, state = forum
    browser = Browser(state.url)
    _, page = browser.get("/user/login/")
    assert 'name="username"' in page and 'name="password"' in page
    assert "Homelab Commons" in page
    _, css = browser.get("/static/spirit/stylesheets/styles.all.min.css")
    assert len(css) > 10_000


def test_a_topic_posted_over_http_is_gone_after_reset(forum: tuple[Site, ServerState]) -> None:
    site, state = forum
    alice = Browser(state.url)
    alice.log_in(site, "alice")
    url, _ = alice.post(
        "/topic/publish/", {"title": PROBE_TITLE, "category": "4", "comment": "Where to buy them?"}
    )
    assert "/topic/" in url
    assert len(probe_topics(site)) == 1
    assert PROBE_TITLE in alice.get("/search/?q=quokkaflux")[1]

    after = lifecycle.reset(site)

    assert after.pid == state.pid  # no restart: the server reads the restored files
    assert probe_topics(site) == []
    bilal = Browser(state.url)  # sessions live in the database, so alice's is gone with it
    bilal.log_in(site, "bilal")
    assert PROBE_TITLE not in bilal.get("/search/?q=quokkaflux")[1]
    assert "Backup strategy: restic to Backblaze B2" in bilal.get("/search/?q=restic")[1]


def test_down_leaves_no_process(forum: tuple[Site, ServerState]) -> None:
    site, _ = forum
    assert_down_leaves_no_process(site, str(site.live / "manage.py"))
