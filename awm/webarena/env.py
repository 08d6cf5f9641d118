"""One live browser per worker on BrowserGym: reset a task, execute typed actions, observe pruned pages.

Why a session object and not `gym.make` in the runner: it owns the things BrowserGym leaves to callers,
namely a chat window that costs a second browser per reset (replaced here by an in-memory stand-in), the
observation delay as a knob, pre-checks that make a disabled or hidden target fail in milliseconds instead
of a Playwright timeout, and recovery from a crashed or hung browser (the episode ends `env_error`; the next
reset starts clean).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from awm.actions import Action, browsergym_action_set
from awm.config import BrowserSettings
from awm.errors import ConfigError, SetupError
from awm.gate import DenyGate, FolderGate, Gate, TerminalGate
from awm.goal_values import asks_to_drag, asks_to_select_text
from awm.proctree import descendants, kill_pids
from awm.rails import RailsError
from awm.secrets import Secrets, secrets_from_env
from awm.trajectory import Box, TargetDesc, Task
from awm.webarena.dom import PageDom, parse_dom
from awm.webarena.fingerprint import PageSnapshot, snapshot_page
from awm.webarena.guard import LiveRails
from awm.webarena.observation import build_observation, page_html
from awm.webarena.outcomes import EnvCrashError, ExecResult, looks_like_crash
from awm.webarena.sanitize import sanitize_text

logger = logging.getLogger(__name__)


def open_tabs(obs: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """`tabs` and `tab_in_focus` of a page state, read off BrowserGym's observation (nothing when one tab
    is open: then there is nothing to switch to)."""
    urls = [redact(str(u)) for u in obs.get("open_pages_urls") or ()]
    if len(urls) < 2:
        return {}
    titles = [redact(sanitize_text(str(t), 80)) for t in obs.get("open_pages_titles") or ()]
    titles += [""] * (len(urls) - len(titles))
    active = obs.get("active_page_index")
    index = int(active[0]) if active is not None and len(active) else 0
    return {"tabs": [f"'{t}' {u}" for t, u in zip(titles, urls, strict=True)], "tab_in_focus": index}


class PageState(BaseModel):
    """What the policy sees at one step: pruned sanitized lines, the ids it may act on, and page facts."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    text: str
    ids: list[str]
    elements: dict[str, TargetDesc]
    url: str
    goal: str
    fingerprint: str
    last_action_error: str = ""
    # The raw screenshot (H x W x 3 uint8 array); PNG bytes are made only when asked (`screenshot_png`):
    # encoding costs ~30 ms a page, most of a step's time outside the model, and is wasted unless recorded.
    screenshot: Any = Field(default=None, exclude=True, repr=False)
    snapshot: PageSnapshot | None = Field(default=None, exclude=True, repr=False)
    # The page's DOM snapshot (decoded once, `awm.webarena.dom`) and BrowserGym's extra element properties
    # (None: `[browser] pages` off); written out as HTML only when asked (`html`), like the screenshot.
    dom: tuple[PageDom, Any] | None = Field(default=None, exclude=True, repr=False)
    secrets: Secrets = Field(default_factory=Secrets, exclude=True, repr=False)  # redacted from `html`
    # BrowserGym's extra element properties as observed (a reference, no copy): each element's box.
    properties: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)
    # Which form each element sits in (id -> form key, `Observation.forms`; an element outside any form
    # is absent): what a form's own submit button is, as against a banner's button beside the form.
    forms: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    # The ids of its text boxes of several lines (`Observation.multiline`): where a composed text goes.
    multiline: frozenset[str] = Field(default_factory=frozenset, exclude=True, repr=False)
    # Each text field's form key, its name or id (`Observation.field_keys`): what a field is for where its
    # label is an instruction ("You may use WikiFormatting here." is the box named `comment`).
    field_keys: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    # The browser's open tabs, each as "'title' url", and which one this page is (`tab_in_focus`): a link
    # with target="_blank" or a window.open moves the episode to a new tab (BrowserGym follows the tab that
    # shows), and the model must be told there is another to go back to (`tab_focus`, `tab_close`).
    tabs: list[str] = Field(default_factory=list)
    tab_in_focus: int = 0
    _png: bytes | None = PrivateAttr(default=None)
    _html: str | None = PrivateAttr(default=None)

    def flags(self, bid: str) -> tuple[str, ...]:
        """The element's state words (checked, selected, disabled...), from the page snapshot, else from
        its observation line (`[18] checkbox 'Jc', checked, focused`)."""
        if self.snapshot is not None and bid in self.snapshot.controls:
            return tuple(self.snapshot.controls[bid].flags)
        head = f"[{bid}] "
        line = next((ln for ln in self.text.splitlines() if ln.startswith(head)), "")
        return tuple(word.strip() for word in line.split(",")[1:])

    def value(self, bid: str) -> str | None:
        """The element's current value as the page shows it (sanitized, at most a line's length; None:
        no value), from the page snapshot, else from its observation line (`value='...'`)."""
        if self.snapshot is not None and bid in self.snapshot.controls:
            return self.snapshot.controls[bid].value
        head = f"[{bid}] "
        line = next((ln for ln in self.text.splitlines() if ln.startswith(head)), "")
        shown = re.search(r" value='([^']*)'", line)
        return shown.group(1) if shown else None

    def box(self, bid: str | None) -> Box | None:
        """The element's box on this page's screenshot, in its pixels (BrowserGym scales `bbox` as it
        scales the screenshot: MiniWoB++'s by 1.5); None: no such element, or it has no box."""
        return Box.of((self.properties.get(bid) or {}).get("bbox")) if bid else None

    def screenshot_png(self) -> bytes | None:
        """The screenshot as PNG, encoded on first call and kept; None without a screenshot."""
        if self._png is None and self.screenshot is not None:
            self._png = encode_png(self.screenshot)
        return self._png

    def html(self) -> str | None:
        """The page as HTML, elements carrying their BrowserGym ``bid`` (`observation.page_html`), made on
        first call and kept; None without a DOM snapshot."""
        if self._html is None and self.dom is not None:
            try:
                self._html = self.secrets.redact(page_html(*self.dom)) or None
            except Exception:  # a page snapshot is a record, like the screenshot; never fail a step for it
                logger.debug("page snapshot conversion failed", exc_info=True)
        return self._html


# --------------------------------------------------------------------------------------------------
# BrowserGym without its chat browser
# --------------------------------------------------------------------------------------------------

_CHAT_ROLES = ("user", "user_image", "assistant", "info", "infeasible")


class RecordingChat:
    """In-memory stand-in for BrowserGym's `Chat`: same `messages` and `add_message` rules, no browser.

    `send_msg_to_user` answers and `report_infeasible` reasons land in `messages` exactly as BrowserGym
    records them, so task validators (WebArena's string match, open-ended's "exit") see the same data.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.messages: list[dict[str, Any]] = []
        self.recording_start_time = None

    def add_message(self, role: str, msg: str) -> None:
        if role not in _CHAT_ROLES:
            raise ValueError(f"Invalid role: {role}")
        if role != "info":
            self.messages.append({"role": role, "timestamp": time.time(), "message": msg})

    def wait_for_user_message(self) -> None:
        raise RuntimeError("interactive chat is not available in awm sessions")

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _chat_stand_in() -> Iterator[None]:
    """Let BrowserGym's `reset` build a `RecordingChat` instead of launching a chat browser.

    BrowserEnv.reset creates `Chat(...)` by its module-level name; swapping that name for the duration of
    our own reset call (single-threaded, like all sync Playwright use) changes nothing on disk and nothing
    for other BrowserGym users in the process outside the call.
    """
    import browsergym.core.env as bg_env

    original = bg_env.Chat
    bg_env.Chat = RecordingChat  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        bg_env.Chat = original


def _quiet_env_class() -> type:
    from browsergym.core.env import BrowserEnv

    class QuietBrowserEnv(BrowserEnv):
        """BrowserEnv whose chat is a `RecordingChat` (one browser per reset instead of two)."""

        def reset(self, *args: Any, **kwargs: Any) -> Any:
            with _chat_stand_in():
                return super().reset(*args, **kwargs)

    return QuietBrowserEnv


class _DropOverrideWarnings(logging.Filter):
    """BrowserGym warns on every reset that our configured viewport/timeout override the task's: expected."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Overriding the task's")


_OVERRIDE_FILTER = _DropOverrideWarnings()


def _quiet_override_warnings() -> None:
    bg_logger = logging.getLogger("browsergym.core.env")
    if _OVERRIDE_FILTER not in bg_logger.filters:
        bg_logger.addFilter(_OVERRIDE_FILTER)


LIVE_BENCHMARK = "live"  # a user-named page (`awm run --url`, the live page): it runs inside the rails


def is_live(task: Task) -> bool:
    """Whether `task` is a live run on a user-named page, held to the rails (DESIGN.md section 9)."""
    return task.benchmark == LIVE_BENCHMARK


def agent_ends(task: Task) -> bool:
    """Whether the agent must end the episode itself: a live page has no reward at all, and an arena
    task is judged when the agent answers or gives up (a check of the site's state may end it earlier)."""
    return task.benchmark in (LIVE_BENCHMARK, "sites")


def resolve_env_id(task: Task) -> tuple[str, dict[str, Any]]:
    """`miniwob.click-test` or `browsergym/miniwob.click-test` -> the gym id, plus `task.meta["task_kwargs"]`."""
    if is_live(task):
        env_id = "browsergym/openended"  # a user-named page: BrowserGym's open-ended task
    else:
        env_id = task.task_id if task.task_id.startswith("browsergym/") else f"browsergym/{task.task_id}"
    kwargs = task.meta.get("task_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ConfigError(
            f"task {task.key}: meta.task_kwargs must be a table of task arguments, got {kwargs!r}"
        )
    return env_id, dict(kwargs)


def _import_benchmark(env_id: str) -> None:
    """Importing a BrowserGym benchmark package registers its gym ids."""
    family = env_id.removeprefix("browsergym/").split(".", 1)[0]
    module = {"miniwob": "browsergym.miniwob", "webarena": "browsergym.webarena",
              "visualwebarena": "browsergym.visualwebarena", "workarena": "browsergym.workarena",
              "assistantbench": "browsergym.assistantbench", "weblinx": "browsergym.weblinx",
              "sites": "awm.sites.task"}.get(family)  # fmt: skip
    import browsergym.core  # noqa: F401  (registers browsergym/openended)

    if module:
        try:
            importlib.import_module(module)  # a name from the table above, never from input
        except ImportError as exc:
            raise SetupError(f"task family '{family}' needs the package {module}: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Browser processes (for the watchdog and crash tests)
# --------------------------------------------------------------------------------------------------


def browser_pids(root: int | None = None) -> set[int]:
    """Main Chromium processes (not renderers/helpers) descended from this process (Linux /proc)."""
    found: set[int] = set()
    for pid in descendants(root or os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # Chromium rewrites its children's argv into one string, so look for "--type=" anywhere.
        if argv and b"chrom" in argv[0].lower() and b"--type=" not in b" ".join(argv):
            found.add(pid)
    return found


class _Watchdog:
    """Kills the session's browser if one call runs past its deadline, so a hung page cannot hang the run."""

    def __init__(self, seconds: float, pids: Callable[[], set[int]]) -> None:
        self.fired = False
        self._pids = pids
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        kill_pids(self._pids())

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


# --------------------------------------------------------------------------------------------------
# The session
# --------------------------------------------------------------------------------------------------


def _guarded_entrypoint(entrypoint: Callable[..., Any], session: BrowserSession) -> Callable[..., Any]:
    """The task factory, with each task's `setup` putting the session's rails on the browser context first.

    Why here: BrowserGym creates the context and page inside `reset` and has the task open its first
    URL in `setup`; this is the one moment after the context exists and before any request leaves.
    (The registered entry point is a partial over the task class, so the task is wrapped, not subclassed.)
    """

    def make(*args: Any, **kwargs: Any) -> Any:
        task = entrypoint(*args, **kwargs)
        original = task.setup

        def setup(page: Any) -> Any:
            if session.rails is not None:
                session.rails.guard.install(page.context)
            return original(page=page)

        task.setup = setup
        return task

    return make


class BrowserSession:
    """One BrowserGym environment per worker, reused across episodes of the same task id.

    A `live` task (`is_live`) runs inside the rails: its start URL is checked before the browser opens it,
    the context gets the route guard (`awm.webarena.guard`) and refuses downloads, and `self.rails` is
    what the executor and the harness ask before and after each action. `gate` answers the confirmation
    gate (default: from `config.rails.confirm`).
    """

    def __init__(self, config: BrowserSettings | None = None, *, gate: Gate | None = None) -> None:
        self.config = config or BrowserSettings()
        self.gate = gate
        self.rails: LiveRails | None = None
        # Values the executor may type for `{name}` placeholders and every record redacts (`awm.secrets`):
        # an arena task's login password, taken from the task after each reset.
        self.secrets = Secrets()
        self.reward: float = 0.0
        self.done: bool = False  # the task ended (BrowserGym's `terminated`): the page closed it
        # The environment cut the episode short (gymnasium's `truncated`: a time limit a wrapper or a task
        # sets), which says nothing of the task: never `done`. BrowserGym's own env does not truncate.
        self.truncated: bool = False
        self.info: dict[str, Any] = {}
        self._env: Any = None
        self._env_key: tuple[str, ...] | None = None
        self._obs: dict[str, Any] | None = None
        self._obs_fresh = False
        self._pids: set[int] = set()
        self._broken = False
        self._goal = ""
        self.last_page: PageState | None = None  # the latest observation (the harness clears it per episode)

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def pids(self) -> set[int]:
        """The main Chromium process of the current episode (empty before the first reset)."""
        return set(self._pids)

    @property
    def last_obs(self) -> dict[str, Any] | None:
        """BrowserGym's raw observation of the last reset/step (for benchmarks and debugging; read-only)."""
        return self._obs

    @property
    def page(self) -> Any:
        """The active Playwright page (for the executor's pre-checks)."""
        if self._env is None or self._env.page is None:
            raise EnvCrashError("no browser page: call reset() first")
        return self._env.page

    def _gate(self) -> Gate:
        if self.gate is not None:
            return self.gate
        rails = self.config.rails
        if rails.confirm == "terminal":
            return TerminalGate(rails.confirm_timeout_s, shots_dir=rails.confirm_dir)
        if rails.confirm == "app":
            if rails.confirm_dir is None:
                raise ConfigError("[browser.rails] confirm = 'app' needs confirm_dir (the folder the app answers in)")
            return FolderGate(rails.confirm_dir, rails.confirm_timeout_s)
        return DenyGate()

    def _make_env(self, env_id: str, task_kwargs: dict[str, Any], *, live: bool = False) -> Any:
        import gymnasium as gym

        from awm.webarena import playwright_stack

        playwright_stack.install()
        _quiet_override_warnings()
        _import_benchmark(env_id)
        if task_kwargs.get("task_files"):  # an arena task from a researcher's own task file
            from awm.sites.task import register_task_files

            register_task_files([str(f) for f in task_kwargs["task_files"]])
        try:
            registered = gym.make(env_id, task_kwargs=task_kwargs) if task_kwargs else gym.make(env_id)
        except gym.error.Error as exc:
            raise ConfigError(f"unknown BrowserGym task '{env_id}': {exc}") from None
        entrypoint = registered.unwrapped.task_entrypoint
        if live:
            entrypoint = _guarded_entrypoint(entrypoint, self)
        cfg = self.config
        action_set = browsergym_action_set()
        action_set.multiaction = True  # fill-then-Enter goes as one step
        return _quiet_env_class()(
            entrypoint,
            task_kwargs=task_kwargs,
            viewport={"width": cfg.viewport[0], "height": cfg.viewport[1]} if cfg.viewport else None,
            slow_mo=cfg.slow_mo_ms,
            timeout=cfg.action_timeout_ms,
            headless=cfg.headless,
            tags_to_mark="all",
            pw_chromium_kwargs={"chromium_sandbox": False},
            action_mapping=action_set.to_python_code,
            pre_observation_delay=cfg.pre_observation_delay,
            pw_context_kwargs={"accept_downloads": False} if live else {},
        )

    def _drop_env(self) -> None:
        env, self._env, self._env_key = self._env, None, None
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()
        kill_pids({pid for pid in self._pids if Path(f"/proc/{pid}").exists()})
        self._pids = set()

    def reset(self, task: Task) -> PageState:
        """Start `task` (seed = task.seed) in a fresh page; the page's goal is in the returned `PageState`
        (the caller's task is not changed)."""
        env_id, task_kwargs = resolve_env_id(task)
        live = is_live(task)
        self.rails = None
        if live:  # before any browser starts: a refused URL is a RailsError naming the reason
            start_url = str(task_kwargs.get("start_url", ""))
            secrets = Secrets(secrets_from_env(self.config.rails.secrets))
            self.rails = LiveRails(start_url, self.config.rails, self._gate(), secrets=secrets)
        key = (env_id, repr(sorted(task_kwargs.items())), str(live))
        if self._broken or self._env_key != key:
            self._drop_env()
            self._broken = False
        if self._env is None:
            self._env = self._make_env(env_id, task_kwargs, live=live)
            self._env_key = key
        self.reward, self.done, self.truncated, self.info = 0.0, False, False, {}
        before = browser_pids()
        try:
            with _Watchdog(self.config.call_timeout_s, lambda: browser_pids() - before) as dog:
                obs, info = self._env.reset(seed=task.seed)
                self._restore_viewport()
        except (ConfigError, SetupError, RailsError):
            raise
        except Exception as exc:
            self._broken = True
            if isinstance(exc, ValueError) and "MINIWOB_URL" in str(exc):
                raise SetupError("MiniWoB pages not found: call awm.assets.configure_runtime_env()") from None
            raise EnvCrashError(
                f"reset of {task.key} failed: {type(exc).__name__}: {_first_line(exc)}"
            ) from exc
        if dog.fired:
            self._broken = True
            raise EnvCrashError(f"reset of {task.key} hung for {self.config.call_timeout_s:.0f} s")
        self._pids = browser_pids() - before
        task_secrets = getattr(getattr(self._env, "task", None), "secrets", None)
        self.secrets = self.rails.secrets if self.rails else Secrets(task_secrets() if callable(task_secrets) else None)
        self.info = dict(info)
        self._set_obs(obs)
        self._goal = str(obs.get("goal", ""))
        return self.observe()

    def close(self) -> None:
        """Close the browser; the session can be reset again afterwards."""
        self._drop_env()

    def __enter__(self) -> BrowserSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- stepping --------------------------------------------------------------------------------
    def _set_obs(self, obs: dict[str, Any]) -> None:
        self._obs, self._obs_fresh = obs, True

    def _guarded(self, what: str, fn: Any) -> Any:
        """Run one BrowserGym call under the watchdog; any Playwright failure there is a crash."""
        if self._env is None or self._broken:
            raise EnvCrashError("the browser is gone; reset() starts a new one")
        dog = _Watchdog(self.config.call_timeout_s, lambda: set(self._pids))
        try:
            with dog:
                result = fn()
        except Exception as exc:
            self._broken = True
            if dog.fired:
                raise EnvCrashError(self._hung(what)) from exc
            raise EnvCrashError(f"{what} failed: {type(exc).__name__}: {_first_line(exc)}") from exc
        if dog.fired:
            self._broken = True
            raise EnvCrashError(self._hung(what))
        return result

    def _restore_viewport(self) -> None:
        """Put the page back at the configured viewport after BrowserGym's screenshot.

        Why: BrowserGym takes each observation's screenshot on a DevTools session of its own, overriding
        the device metrics and detaching; with this Chromium the detach drops Playwright's viewport too,
        and the page is laid out at the headless window's 780 x 493 until the next navigation (measured:
        `innerWidth` 1280 before the observation, 780 after; a real site's navigation bar then folds its
        search box and login link away). Resizing by a pixel and back makes Playwright apply it again.
        """
        size = self.config.viewport
        page = self._env.page if self._env is not None else None
        if not size or page is None:
            return
        with contextlib.suppress(Exception):  # a closed or navigating page keeps what it has
            page.set_viewport_size({"width": size[0], "height": size[1] + 1})
            page.set_viewport_size({"width": size[0], "height": size[1]})

    def _hung(self, what: str) -> str:
        return f"{what} hung for more than {self.config.call_timeout_s:.0f} s; the browser was killed"

    def step_rendered(self, action_str: str) -> str:
        """Execute an already rendered action string through BrowserGym; returns its last_action_error."""
        obs, reward, terminated, truncated, info = self._guarded("step", lambda: self._env.step(action_str))
        self._restore_viewport()
        self._set_obs(obs)
        self.reward = float(reward)
        self.done = bool(terminated)
        self.truncated = bool(truncated) and not self.done
        self.info = dict(info)
        error = self.secrets.redact(str(obs.get("last_action_error") or ""))
        if error and looks_like_crash(error):
            self._broken = True
            raise EnvCrashError(f"the browser died during the action: {_first_line(error)}")
        return error

    def validate_at_end(self) -> None:
        """For a task that asks to be judged on the page the episode ended on (`validate_at_end`, the
        arena's): let the network go quiet (a request the last action started gets its answer), then ask
        its check once more. Why: the check after each step runs `pre_observation_delay` after the
        action, and a form posted to a busy server may not have answered by then (seen on the shop: a
        replay's last click counted as failed while its page was still loading)."""
        task = getattr(self._env, "task", None) if self._env is not None else None
        if self.done or not getattr(task, "validate_at_end", False) or self._broken:
            return

        def check() -> tuple[float, bool, str, dict]:
            with contextlib.suppress(Exception):  # a page that never goes quiet is checked as it is
                self._env.page.wait_for_load_state("networkidle", timeout=5_000)
            return task.validate(self._env.page, self._env.chat.messages)

        try:
            reward, done, _, info = self._guarded("final check", check)
        except EnvCrashError:
            return
        self.reward, self.done = float(reward), bool(done) or self.done
        self.info = {**self.info, "task_info": info}

    def return_to(self, url: str) -> None:
        """Bring the page back to `url`, a page of the site the run may visit (after the rails aborted a
        navigation off it, the tab shows an error page); the next `observe` reads the page afresh."""
        self._guarded("return", lambda: self._env.page.goto(url, wait_until="load"))
        self._obs_fresh = False

    def execute(self, action: Action) -> ExecResult:
        """Pre-check the target, execute the rendered action, classify what happened (see executor)."""
        from awm.webarena.executor import execute_action

        return execute_action(self, action)

    def observe(self) -> PageState:
        """The page after the last reset/step, or a freshly extracted one if that was already observed."""
        if not self._obs_fresh or self._obs is None:
            obs = self._guarded("observe", lambda: self._env._get_obs())
            self._restore_viewport()
            self._set_obs(obs)
        self._obs_fresh = False
        return self._page_state(self._obs)

    def _page_state(self, obs: dict[str, Any]) -> PageState:
        """The observation as the policy sees it; kept as `last_page` (what the episode's final page is)."""
        dom = parse_dom(obs.get("dom_object"))  # once: the observation's hints and figures, the page's HTML
        built = build_observation(
            obs.get("axtree_object") or {},
            obs.get("extra_element_properties") or {},
            dom=dom,
            focused_bid=str(obs.get("focused_element_bid") or ""),
            token_budget=self.config.obs_token_budget,
            prune=self.config.obs_prune,
            # Blocks of text carry ids when the goal asks to highlight text (what `select_text` takes) or to
            # drag something (a column's heading or a list's text is where `drag` can drop it).
            text_ids=asks_to_select_text(self._goal) or asks_to_drag(self._goal),
        )
        url = str(obs.get("url", ""))
        snapshot = snapshot_page(url, built)
        shot = obs.get("screenshot") if self.config.screenshots else None
        page = (dom, obs.get("extra_element_properties")) if self.config.pages and dom is not None else None
        redact = self.secrets.redact  # a page that shows a typed secret back shows its placeholder
        self.last_page = PageState(
            text=redact(built.text), ids=built.ids, elements=built.elements, url=redact(url), goal=self._goal,
            fingerprint=snapshot.digest(),
            last_action_error=redact(sanitize_text(obs.get("last_action_error"), 400)),
            screenshot=shot, snapshot=snapshot, dom=page, secrets=self.secrets,
            properties=obs.get("extra_element_properties") or {}, forms=built.forms,
            multiline=built.multiline, field_keys=built.field_keys, **open_tabs(obs, redact),
        )  # fmt: skip
        return self.last_page

    def mark_broken(self) -> None:
        """Make the next reset start a clean browser (after a crash the harness noticed)."""
        self._broken = True


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def encode_png(array: Any) -> bytes | None:
    """PNG bytes of an H x W x 3 (or x 4) uint8 array: rows unfiltered, zlib level 1.

    Why not PIL's encoder: it picks a filter per row, which costs more than the compression saves on
    flat web pages; this writes the same pixels (any PNG reader gives the array back) about twice as
    fast at about the same size (measured on a 1920 x 1080 MiniWoB page: ~36 ms vs ~80 ms, 37 kB).
    Anything else goes through PIL.
    """
    if array is None:
        return None
    try:
        import numpy as np

        pixels = np.asarray(array)
        if pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] in (3, 4):
            height, width, channels = pixels.shape
            rows = np.zeros((height, width * channels + 1), dtype=np.uint8)  # byte 0 of a row: filter 0
            rows[:, 1:] = pixels.reshape(height, width * channels)
            color_type = 2 if channels == 3 else 6
            header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
            return (
                b"\x89PNG\r\n\x1a\n"
                + _png_chunk(b"IHDR", header)
                + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
                + _png_chunk(b"IEND", b"")
            )
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)
        return buffer.getvalue()
    except Exception:  # a screenshot is a nicety; never fail a step for it
        logger.debug("screenshot conversion failed", exc_info=True)
        return None


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )
