"""Postconditions: what the page must show after a step or a task, checked in the page, polled.

One small JavaScript evaluator walks the condition (JSON, from `awm.grounding.model`) in the page's main
frame, so a check is one round trip and reads the page as a person sees it (visible rows, text, field
values), never what an agent says. `wait_for` polls every 0.1 s for up to 2 s: pages settle
asynchronously, and nothing may wait without a bound.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import TypeAdapter

from awm.grounding.model import Postcondition

POLL_S = 0.1
VERIFY_TIMEOUT_S = 2.0

_CHECK_JS = r"""
(cond) => {
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  const shown = (el) => {
    if (!el) return false;
    const st = getComputedStyle(el);
    if (st.display === "none" || st.visibility === "hidden" || parseFloat(st.opacity) === 0) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  };
  const rows = (sel) => {
    const table = document.querySelector(sel);
    if (!table) return [];
    const body = table.tBodies && table.tBodies.length ? table.tBodies[0] : table;
    return Array.from(body.querySelectorAll("tr")).filter(shown);
  };
  const check = (c) => {
    const one = c.selector ? document.querySelector(c.selector) : null;
    switch (c.kind) {
      case "text_is": return !!one && norm(one.innerText) === norm(c.text);
      case "text_contains": return !!one && norm(one.innerText).includes(norm(c.text));
      case "field_value_is": return !!one && String(one.value ?? "") === c.value;
      case "visible_rows": return rows(c.selector).length === c.count;
      case "first_cell_is": {
        const r = rows(c.selector)[0];
        return !!r && !!r.cells[0] && norm(r.cells[0].innerText) === norm(c.text);
      }
      case "cell_text_is": {
        const r = rows(c.selector)[c.row];
        return !!r && !!r.cells[c.column] && norm(r.cells[c.column].innerText) === norm(c.text);
      }
      case "li_count_is": {
        const list = document.querySelector(c.selector);
        return !!list && list.querySelectorAll("li").length === c.count;
      }
      case "is_checked": return !!one && !!one.checked === c.checked;
      case "element_visible": return shown(one);
      case "element_absent": return Array.from(document.querySelectorAll(c.selector)).every((e) => !shown(e));
      case "element_count_is": return document.querySelectorAll(c.selector).length === c.count;
      case "url_matches": return c.regex ? new RegExp(c.pattern).test(location.href) : location.href.includes(c.pattern);
      case "all_of": return c.checks.every(check);
    }
    return false;
  };
  return check(cond);
}
"""

_ADAPTER: TypeAdapter[Postcondition] = TypeAdapter(Postcondition)


def holds(page: Any, condition: Postcondition) -> bool:
    """Whether `condition` is true on the page now (False when the page cannot be read)."""
    try:
        return bool(page.main_frame.evaluate(_CHECK_JS, _ADAPTER.dump_python(condition, mode="json")))
    except Exception:  # noqa: BLE001 - a page mid-navigation reads as "not yet"
        return False


def wait_for(
    page: Any, condition: Postcondition, timeout_s: float = VERIFY_TIMEOUT_S, poll_s: float = POLL_S
) -> bool:
    """Poll `condition` every `poll_s` until it holds or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        if holds(page, condition):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
