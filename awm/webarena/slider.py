"""Setting a slider to a value the way a person does with the keyboard: focus its handle, press the
arrow keys, watch the number it shows.

Why: the development split's slider tasks (use-slider, use-slider-2, form-sequence) were 0 of 9. The
model clicked the slider box (which moves the handle to the box's centre) and submitted; BrowserGym's
actions have no "set this slider to 7", and a drag to a value needs the slider's bounds, which a script
slider (jQuery UI's) does not publish. Its keyboard does work on every slider we know of (ARIA sliders,
`<input type=range>`, jQuery UI): each ArrowRight/ArrowLeft moves it by one step.

The value is read as the observation shows it (`awm.webarena.observation`): the slider's own value
(`aria-valuenow`, a range input's value), else the number printed in the element just after it. The
presses go through BrowserGym's `press` like any other action; reading the number is all this module
does in the page itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from awm.actions import Action

# Runs on the slider (the element the observation names): its handle's id and the value it shows.
SLIDER_JS = r"""
(e) => {
  const range = e.tagName === 'INPUT' && (e.type || '').toLowerCase() === 'range';
  const own = range || e.getAttribute('role') === 'slider';
  const handle = own ? e : e.querySelector('[role=slider], [tabindex]:not([tabindex="-1"])');
  if (!handle || !handle.getAttribute('bid')) return null;
  const number = (text) => /^\s*-?\d+(\.\d+)?\s*$/.test(text || '') ? parseFloat(text) : null;
  let value = range ? number(e.value) : number(handle.getAttribute('aria-valuenow'));
  if (value === null && !own) {
    const next = e.nextElementSibling;
    value = next ? number(next.innerText || next.textContent) : null;
  }
  return {handle: handle.getAttribute('bid'), value: value};
}
"""

MAX_PRESSES = 400  # a slider of 0..100 in steps of 1 is 100 presses; more means we misread it
ROUNDS = 3  # the first round assumes a step of 1; the next rounds correct with the step seen


class SliderState(BaseModel):
    """A slider's handle (what takes the keys) and the value it shows now (None: none to read)."""

    handle: str
    value: float | None


def read_slider(locator: Any, timeout_ms: int = 1000) -> SliderState | None:
    """The slider's handle and value, or None when `locator` is not a slider with a focusable handle."""
    data = locator.evaluate(SLIDER_JS, timeout=timeout_ms)
    return SliderState.model_validate(data) if data else None


def target_value(text: str) -> float | None:
    """The number a `fill` asks the slider for ("7", "-3", " 2.5 "), else None."""
    try:
        return float(text.strip())
    except ValueError:
        return None


def presses(handle: str, delta: float, step: float) -> list[Action]:
    """The arrow presses that move a slider by `delta` at `step` per press (right/up is more)."""
    count = min(MAX_PRESSES, round(abs(delta) / step)) if step > 0 else 0
    key = "ArrowRight" if delta > 0 else "ArrowLeft"
    return [Action(name="press", args={"bid": handle, "key_comb": key})] * count


def shown(value: float) -> str:
    """A value as the page prints it: `7`, not `7.0`."""
    return str(int(value)) if value == int(value) else str(value)
