"""The arena's shop (django-oscar) as the arena uses it: it answers with its styles, a seeded customer logs
in through Oscar's own form (email and password), what she does over HTTP (a basket line, a review,
which also rewrites the product's search index entry) is gone after `reset` without a restart, and
`down` leaves no process behind.

Uses the default sites root, which `make test`'s set-up fills (`awm sites setup --site shop`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from awm.sites import lifecycle
from awm.sites.lifecycle import ServerState
from awm.sites.site import Site
from tests.site_http import FormClient, assert_down_leaves_no_process, read, running_site

pytestmark = pytest.mark.sites

PRODUCT = "Cast Iron Skillet 10-inch"
PROBE_REVIEW = "Probe review about quokkaflux seasoning"


class Browser(FormClient):
    """Oscar's pages over HTTP, with Django's CSRF token."""

    def __init__(self, base: str) -> None:
        super().__init__(base, "csrftoken", "csrfmiddlewaretoken")

    def log_in(self, site: Site, email: str) -> None:
        self.get("/accounts/login/")
        url, page = self.post(
            "/accounts/login/",
            {
                "login-username": email,
                "login-password": site.account(email).password,
                "login_submit": "Log In",
            },
        )
        assert url.endswith("/accounts/profile/"), f"login as {email} did not land on the profile page: {url}"
        assert "/accounts/logout/" in page


def alice_state(site: Site) -> tuple[int, int]:
    """Alice's open basket lines and her probe reviews."""
    lines = read(
        site,
        "SELECT l.id FROM basket_line l JOIN basket_basket b ON b.id = l.basket_id "
        "JOIN auth_user u ON u.id = b.owner_id WHERE u.email = 'alice@example.com' AND b.status = 'Open'",
    )
    reviews = read(site, "SELECT id FROM reviews_productreview WHERE title = ?", PROBE_REVIEW)
    return len(lines), len(reviews)


@pytest.fixture(scope="module")
def shop() -> Iterator[tuple[Site, ServerState]]:
    yield from running_site("shop")


def test_the_login_page_answers_with_its_styles(shop: tuple[Site, ServerState]) -> None:
    _, state = shop
    browser = Browser(state.url)
    _, page = browser.get("/accounts/login/")
    assert 'name="login-username"' in page and 'name="login-password"' in page
    assert "Harbor Lane Market" in page
    _, css = browser.get("/static/oscar/css/styles.css")
    assert len(css) > 10_000


def test_a_basket_line_and_a_review_made_over_http_are_gone_after_reset(
    shop: tuple[Site, ServerState],
) -> None:
    site, state = shop
    ((product_id, slug),) = read(site, "SELECT id, slug FROM catalogue_product WHERE title = ?", PRODUCT)
    product_path = f"/catalogue/{slug}_{product_id}/"
    alice = Browser(state.url)
    alice.log_in(site, "alice@example.com")
    alice.post(f"/basket/add/{product_id}/", {"quantity": "2"}, came_from=product_path)
    url, _ = alice.post(
        f"{product_path}reviews/add/", {"title": PROBE_REVIEW, "score": "4", "body": "Holds heat well."}
    )
    assert url.endswith(product_path)
    assert alice_state(site) == (1, 1)
    assert PRODUCT in alice.get("/basket/")[1]
    assert PROBE_REVIEW in alice.get(product_path)[1]

    after = lifecycle.reset(site)

    assert after.pid == state.pid  # no restart: the server reads the restored files
    assert alice_state(site) == (0, 0)
    bob = Browser(state.url)  # sessions live in the database, so alice's is gone with it
    bob.log_in(site, "bob@example.com")
    assert PROBE_REVIEW not in bob.get(product_path)[1]
    assert PRODUCT in bob.get("/search/?q=skillet")[1]  # the restored search index answers


def test_down_leaves_no_process(shop: tuple[Site, ServerState]) -> None:
    site, _ = shop
    assert_down_leaves_no_process(site, str(site.live))
