"""The rails of a live run, enforced in the browser: a route guard, downloads off, field refusals, the gate.

`awm.rails` decides (pure: URLs, hosts, fields); this module applies those decisions to one episode on a
user-named page (a `live` task): `RouteGuard` sits on the Playwright context and sees every request
before it leaves (the host re-checked each time, so DNS rebinding is caught; navigation off the entered
registrable domain aborted and recorded; downloads cancelled), and `LiveRails` is what the session, the
executor and the harness ask: is the page still on the site, may this field be filled, does this action
need a person (and what did the person say).

Why a route on the context and not a check of the URL the model typed: pages navigate by themselves
(links, redirects, scripts, popups, frames); only the browser's own request stream sees all of them.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from awm.actions import Action, render_action
from awm.config import RailsSettings
from awm.gate import FILL_ACTIONS, ControlInfo, Gate, GateRequest, sensitive_reason
from awm.rails import (
    RailsError,
    Resolver,
    check_request_host,
    check_url,
    default_resolver,
    field_refusal,
    same_site,
)
from awm.secrets import Secrets
from awm.trajectory import Approval
from awm.webarena.outcomes import RailsRefusal
from awm.webarena.sanitize import sanitize_text

MAX_RECORDED = 200  # blocked requests kept per episode (a page can retry a blocked script forever)


class BlockedRequest(BaseModel):
    """One request the guard aborted: where it went, why, and whether it was the page itself leaving."""

    url: str
    host: str
    reason: str
    navigation: bool
    main_frame: bool


class RouteGuard:
    """Checks every request of one browser context against the entered site and the address rules.

    `install(context)` before the first page loads. Allowed requests fall back to the next route handler
    (the network, or a test's fixture route); refused ones are aborted and kept in `blocked`. A refused
    navigation of the top page sets `stop_reason`: the run must end, naming the domain.
    """

    def __init__(self, entered_host: str, *, allow_hosts: list[str], resolve: Resolver = default_resolver) -> None:
        self.entered_host = entered_host
        self.allow_hosts = list(allow_hosts)
        self.resolve = resolve
        self.blocked: list[BlockedRequest] = []
        self.downloads: list[str] = []
        self.stop_reason: str | None = None
        self._lock = threading.Lock()

    def install(self, context: Any) -> None:
        context.route("**/*", self._on_route)
        context.on("page", self._watch)
        for page in context.pages:
            self._watch(page)

    def _watch(self, page: Any) -> None:
        page.on("download", self._on_download)

    def _on_download(self, download: Any) -> None:
        with self._lock:
            self.downloads.append(sanitize_text(str(getattr(download, "url", "")), 300))
        try:
            download.cancel()
        except Exception:  # already failed or cancelled by accept_downloads=False: nothing to undo
            pass

    def _on_route(self, route: Any, request: Any) -> None:
        reason, host, navigation, main_frame = self.verdict(request)
        if reason is None:
            route.fallback()
            return
        with self._lock:
            if len(self.blocked) < MAX_RECORDED:
                url = sanitize_text(request.url, 300)
                self.blocked.append(BlockedRequest(url=url, host=host, reason=reason, navigation=navigation, main_frame=main_frame))  # fmt: skip
            if navigation and main_frame and self.stop_reason is None:
                self.stop_reason = reason
        route.abort("blockedbyclient")

    def verdict(self, request: Any) -> tuple[str | None, str, bool, bool]:
        """(why to abort or None, host, is a navigation, is the top page's navigation) for one request."""
        navigation = bool(request.is_navigation_request())
        try:
            main_frame = request.frame.parent_frame is None
        except Exception:  # a service worker's request has no frame
            main_frame = False
        parts = urlsplit(request.url)
        host = parts.hostname or ""
        if parts.scheme not in ("http", "https"):
            return f"a {parts.scheme or 'schemeless'}: request is not http or https", host, navigation, main_frame
        reason = check_request_host(
            host_literal(host), entered=self.entered_host, is_navigation=navigation,
            allow_hosts=self.allow_hosts, resolve=self.resolve,
        )  # fmt: skip
        return reason, host, navigation, main_frame


class LiveRails:
    """Everything the rails hold for one live episode: the site entered, the guard, the gate, the limits."""

    def __init__(
        self,
        start_url: str,
        settings: RailsSettings,
        gate: Gate,
        *,
        resolve: Resolver = default_resolver,
        secrets: Secrets | None = None,
    ) -> None:
        verdict = check_url(start_url, allow_hosts=settings.allow_hosts, resolve=resolve)
        if not verdict.allowed:
            raise RailsError(f"refused to open {start_url}: {verdict.reason}")
        self.start_url = start_url
        self.settings = settings
        self.gate = gate
        self.site = verdict.registrable_domain
        self.guard = RouteGuard(host_literal(verdict.host), allow_hosts=settings.allow_hosts, resolve=resolve)
        self.secrets = secrets or Secrets()  # what a password field may take (`awm.secrets`)
        self.approvals: list[Approval] = []
        self._answers: dict[str, Approval] = {}  # this step's answers (a retry is not asked again)

    # --- the page's site ---------------------------------------------------------------------------
    def stop_reason(self, url: str) -> str | None:
        """Why the run must stop now: a blocked navigation of the top page, or a page off the site."""
        if self.guard.stop_reason:
            return f"the page tried to leave {self.site}: {self.guard.stop_reason}"
        return self.page_refusal(url)

    def page_refusal(self, url: str) -> str | None:
        """Why a page at `url` is off the rails (another site, not http/https), or None."""
        if not url or url == "about:blank":
            return None
        host = self._off_site(url)
        if host is None:
            return None
        if not host:
            return f"the page is at {sanitize_text(url, 120)}, not an http(s) page of {self.site}"
        return f"the page left {self.site} for {host}"

    def goto_refusal(self, url: str) -> str | None:
        """Why a `goto` to `url` must not be sent (checked before any request)."""
        host = self._off_site(url)
        if host is None:
            return None
        if not host:
            return f"goto {sanitize_text(url, 120)!r} is not an http(s) URL of {self.site}"
        return f"goto {host} would leave {self.site}"

    def _off_site(self, url: str) -> str | None:
        """None for an http(s) URL on the entered site; else its host ('' when it has no http(s) host)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme not in ("http", "https") or not host:
            return ""
        return None if same_site(host_literal(host), self.guard.entered_host) else host

    # --- fields and the gate -----------------------------------------------------------------------
    def field_refusal(self, action: Action, control: ControlInfo | None) -> str | None:
        """Why the rails never let `action` put a value into this field (password, payment terms)."""
        if action.name not in FILL_ACTIONS or control is None:
            return None
        value = str(action.args.get("value", ""))
        if control.type.strip().lower() == "password" and (
            self.secrets.named_in_password_field(value) or self.secrets.is_value(value)
        ):
            return None  # a named secret, typed by the executor (the model chose its placeholder)
        reason = field_refusal(control)
        return f"refused to fill {control.describe()}: {reason}" if reason else None

    def forgive_navigation(self) -> None:
        """Forget a blocked navigation of the top page once the page is back on the site: the refusal was
        fed back as a slip (`awm.webarena.harness`), and a second one ends the run there."""
        self.guard.stop_reason = None

    def new_step(self) -> None:
        self._answers.clear()

    def review(self, action: Action, control: ControlInfo | None, page: Any) -> Approval | None:
        """Right before `action` runs: raise RailsRefusal for a refused field or an off-site goto; ask the
        gate about a sensitive action (its `Approval`, approved or not); None when nothing was needed."""
        if action.name == "goto":
            refusal = self.goto_refusal(str(action.args.get("url", "")))
            if refusal:
                raise RailsRefusal(refusal)
        refusal = self.field_refusal(action, control)
        if refusal:
            raise RailsRefusal(refusal)
        if control is None:
            return None
        reason = sensitive_reason(
            action.name, control, key=str(action.args.get("key_comb", "")),
            sensitive_fields=self.settings.sensitive_fields, sensitive_clicks=self.settings.sensitive_clicks,
        )  # fmt: skip
        if reason is None:
            return None
        rendered = render_action(action)
        if rendered in self._answers:
            return self._answers[rendered]
        value = action.args.get("value", action.args.get("options", ""))
        request = GateRequest(
            action=rendered, reason=reason, element=control.describe(),
            value=str(value) if value else "", url=_page_url(page), screenshot_png=_screenshot(page),
        )  # fmt: skip
        approval = self.gate.ask(request)
        self.approvals.append(approval)
        self._answers[rendered] = approval
        return approval

    def record(self) -> dict[str, Any]:
        """What the rails saw this episode, for the trajectory's meta (`rails`)."""
        return {
            "site": self.site,
            "start_url": self.start_url,
            "allow_hosts": list(self.settings.allow_hosts),
            "blocked": [b.model_dump() for b in self.guard.blocked],
            "blocked_hosts": sorted({b.host for b in self.guard.blocked}),
            "downloads_cancelled": list(self.guard.downloads),
            "approvals": [a.model_dump(mode="json") for a in self.approvals],
            "stop_reason": self.guard.stop_reason,
        }


def host_literal(host: str) -> str:
    """A host as the rails read it in a URL: an IPv6 address in brackets, anything else as is."""
    return f"[{host}]" if ":" in host else host


def _page_url(page: Any) -> str:
    try:
        return str(page.url)
    except Exception:
        return ""


def _screenshot(page: Any) -> bytes | None:
    try:
        return page.screenshot(timeout=3000)
    except Exception:  # the person is still asked; the request says there is no screenshot
        return None
