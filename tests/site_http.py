"""What the arena's site tests share: a cookie-keeping HTTP client that posts a site's forms with its
form token, the running site for a test module, read-only SQL on its database, and the check that
`down` leaves no process behind. Each site's test module keeps only what is its own (its login form,
what it does over HTTP and how that is undone by `reset`)."""

from __future__ import annotations

import contextlib
import http.cookiejar
import sqlite3
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.sites import lifecycle
from awm.sites.lifecycle import ServerState
from awm.sites.registry import get_site
from awm.sites.site import Site


class FormClient:
    """A cookie-keeping HTTP client; `post` sends the token the site keeps in `token_cookie` as the form
    field `token_field` (Trac's `__FORM_TOKEN`, Django's `csrfmiddlewaretoken`) and the page it came from
    as the Referer (Django checks it on some posts)."""

    def __init__(self, base: str, token_cookie: str, token_field: str) -> None:
        self.base = base
        self.token_cookie, self.token_field = token_cookie, token_field
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[str, str]:
        with self.opener.open(self.base + path, timeout=20) as response:
            return response.geturl(), response.read().decode()

    def post(self, path: str, fields: dict[str, str], *, came_from: str = "") -> tuple[str, str]:
        token = next(c.value for c in self.jar if c.name == self.token_cookie)
        data = urllib.parse.urlencode({**fields, self.token_field: token}).encode()
        request = urllib.request.Request(self.base + path, data=data, headers={"Referer": self.base + (came_from or path)})
        with self.opener.open(request, timeout=20) as response:
            return response.geturl(), response.read().decode()


def running_site(name: str) -> Iterator[tuple[Site, ServerState]]:
    """The body of a test module's site fixture: the seeded site started, stopped after the module."""
    site = get_site(name)
    if not lifecycle.is_seeded(site):
        pytest.fail(f"the {name} site is not set up: run `awm sites setup --site {name}`")
    state = lifecycle.up(site)
    yield site, state
    lifecycle.down(site)


def read(site: Site, sql: str, *args: object) -> list[tuple]:
    """Rows of a read-only query on the site's live database."""
    with contextlib.closing(sqlite3.connect(f"file:{site.database}?mode=ro", uri=True)) as db:
        return db.execute(sql, args).fetchall()


def assert_down_leaves_no_process(site: Site, marker: str) -> None:
    """`down` stops the site, forgets its state and leaves no live process whose command line has `marker`."""
    assert lifecycle.down(site)
    assert lifecycle.server_state(site) is None
    for proc in Path("/proc").glob("[0-9]*/cmdline"):  # a zombie's cmdline is empty: only live processes
        try:
            command = proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        assert marker not in command, f"a {site.name} process is still running: {command}"
