"""The cheap stack capture given to Playwright: the same frames as `inspect.stack(0)`, and Playwright's
errors still name the API call that failed."""

from __future__ import annotations

import inspect
import traceback

import pytest

from awm.webarena import playwright_stack


def _frames(stack: list[inspect.FrameInfo]) -> list[tuple[str, int, str]]:
    return [(f.filename, f.lineno, f.function) for f in stack]


def _nested(depth: int) -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
    if depth:
        return _nested(depth - 1)
    return playwright_stack.fast_stack(), inspect.stack(0)  # one line: both see the same line number


def test_fast_stack_gives_the_frames_inspect_gives():
    fast, real = _nested(5)
    assert _frames(fast) == _frames(real)
    assert fast[0].function == "_nested" and fast[0].frame is real[0].frame
    assert all(f.code_context is None for f in fast)


def test_the_short_extract_keeps_the_innermost_ten_frames():
    def deep(n: int) -> traceback.StackSummary:
        return deep(n - 1) if n else playwright_stack.short_extract_stack()

    short = deep(30)
    full = traceback.extract_stack()
    assert len(short) == 10
    assert short[-1].name == "deep" and full[-1].name == "test_the_short_extract_keeps_the_innermost_ten_frames"


def test_installed_playwright_still_names_the_failing_call(chromium):
    playwright_stack.install()
    playwright_stack.install()  # idempotent
    from playwright._impl import _sync_base

    assert _sync_base.inspect.stack is playwright_stack.fast_stack
    page = chromium.new_page()
    try:
        assert page.evaluate("() => 6 * 7") == 42
        with pytest.raises(Exception) as failure:
            page.evaluate("() => { throw new Error('boom from the page') }")
        assert str(failure.value).startswith("Page.evaluate:")
        assert "boom from the page" in str(failure.value)
    finally:
        page.close()


def test_the_rest_of_the_process_keeps_the_real_modules():
    playwright_stack.install()
    from playwright._impl import _sync_base

    assert inspect.stack is not playwright_stack.fast_stack
    assert _sync_base.inspect.stack is playwright_stack.fast_stack
    assert _sync_base.inspect.signature is inspect.signature  # every other name passes through
