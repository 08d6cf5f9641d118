"""Playwright's per-call stack capture, made cheap: the fix Playwright made upstream, for the version
BrowserGym pins.

Why: every sync Playwright call (`page.evaluate`, `locator.click`, ...) records the caller's stack with
`inspect.stack()` (twice: once in `_sync_base`, once more as an eagerly evaluated `getattr` default in
`_connection`), and `inspect.stack()` reads the source line of every frame and resolves its module by
scanning `sys.modules`. The cost grows with stack depth and with the number of imported modules, so the
same replay ran ~3x slower inside a pytest process that had run a thousand tests than in its own process,
and profiling `awm sites check` showed half its time in `inspect.stack` (issue 24). Playwright fixed this
in 1.53 (microsoft/playwright-python#2835, #2844; #3147 walks `f_back` directly), but browsergym-core
0.14.3 pins `playwright==1.44`, so we cannot take the fix by upgrading.

What it does: gives Playwright's three modules that capture stacks an `inspect` whose `stack` walks
`f_back` and builds each `FrameInfo` from the frame alone (file name, line, function; no source context,
which Playwright never reads), and a `traceback` whose `extract_stack` keeps the 10 innermost frames (the
only ones Playwright prints). Everything else in those modules, and `inspect`/`traceback` for the rest of
the process, is untouched. The frames it returns are the ones `inspect.stack(0)` returns, so Playwright's
API names in errors and its tracing frames are unchanged (tested).
"""

from __future__ import annotations

import inspect
import sys
import traceback
import types
from typing import Any

_PATCHED_MODULES = ("playwright._impl._sync_base", "playwright._impl._connection", "playwright._impl._network")
_KEPT_FRAMES = 10  # Playwright formats `traceback.format_list(stack)[-10:]` and nothing more


def fast_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """The caller's stack, innermost first, as `inspect.stack(0)` gives it, without reading sources."""
    del context  # no source context is read: Playwright never uses it
    frame: types.FrameType | None = sys._getframe(1)
    frames: list[inspect.FrameInfo] = []
    while frame is not None:
        code = frame.f_code
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, None, None))
        frame = frame.f_back
    return frames


def short_extract_stack(f: types.FrameType | None = None, limit: int | None = None) -> traceback.StackSummary:
    """`traceback.extract_stack` of the caller, capped at the innermost frames Playwright prints."""
    start = f if f is not None else sys._getframe(1)
    return traceback.extract_stack(start, limit=min(limit or _KEPT_FRAMES, _KEPT_FRAMES))


class _Namespace(types.ModuleType):
    """A stand-in for a standard module inside Playwright's modules: one function replaced, the rest of
    the real module's names passed through."""

    def __init__(self, real: types.ModuleType, **replaced: Any) -> None:
        super().__init__(real.__name__)
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_FAST_INSPECT = _Namespace(inspect, stack=fast_stack)
_FAST_TRACEBACK = _Namespace(traceback, extract_stack=short_extract_stack)


def install() -> None:
    """Give Playwright's stack-capturing modules the cheap capture; idempotent, process-wide, and a no-op
    where a module is missing or no longer refers to `inspect` (a Playwright that has its own fix)."""
    import importlib

    for name in _PATCHED_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "inspect", None) in (inspect, _FAST_INSPECT):
            module.inspect = _FAST_INSPECT  # type: ignore[attr-defined]
        if getattr(module, "traceback", None) in (traceback, _FAST_TRACEBACK):
            module.traceback = _FAST_TRACEBACK  # type: ignore[attr-defined]
