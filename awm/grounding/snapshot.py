"""A snapshot of a page's actionable elements, in the main frame and its iframes, for grounding.

Why our own snapshot and not the AXTree observation: grounding needs facts the model's observation
leaves out (label[for], name attributes, enclosing form and container ids, computed visibility) and a
handle to act on the element it picked. Each element found is tagged with a `data-awm-ref` attribute
(frame index + position), so the executor acts on exactly the element that was grounded.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

REF_ATTRIBUTE = "data-awm-ref"

# Runs inside each frame; returns plain data only. Role mapping follows the suite's contract.
_SNAPSHOT_JS = r"""
(frameIndex) => {
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  const roleOf = (el) => {
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute("type") || "").toLowerCase();
    const aria = (el.getAttribute("role") || "").toLowerCase();
    if (aria === "link") return "link";
    if (aria === "button") return "button";
    if (tag === "a") return "link";
    if (tag === "button") return "button";
    if (tag === "select") return "combobox";
    if (tag === "textarea") return "textbox";
    if (tag === "input") {
      if (["submit", "button", "reset", "image"].includes(type)) return "button";
      if (type === "checkbox") return "checkbox";
      if (type === "radio") return "radio";
      if (["", "text", "email", "password", "search", "tel", "url", "number"].includes(type)) return "textbox";
    }
    return "";
  };
  const labelOf = (el) => {
    if (el.id) {
      const byFor = document.querySelector(`label[for="${CSS.escape(el.id)}"]`);
      if (byFor) return norm(byFor.innerText);
    }
    const wrap = el.closest("label");
    if (wrap) {
      const clone = wrap.cloneNode(true);
      clone.querySelectorAll("input,select,textarea,button").forEach((c) => c.remove());
      const text = norm(clone.innerText || clone.textContent);
      if (text) return text;
    }
    return norm(el.getAttribute("aria-label"));
  };
  const visible = (el) => {
    const style = getComputedStyle(el);
    if (style.display === "none" || style.visibility === "hidden" || parseFloat(style.opacity) === 0) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  };
  const selector = 'a, button, input:not([type="hidden"]), select, textarea, [role="button"], [role="link"]';
  const out = [];
  let n = 0;
  for (const el of document.querySelectorAll(selector)) {
    const role = roleOf(el);
    if (!role) continue;
    const ref = `${frameIndex}-${n++}`;
    el.setAttribute("data-awm-ref", ref);
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute("type") || "").toLowerCase();
    const isInputButton = tag === "input" && ["submit", "button", "reset"].includes(type);
    const ancestors = [];
    for (let p = el.parentElement; p && ancestors.length < 8; p = p.parentElement) {
      if (p.id) ancestors.push(p.id);
    }
    const form = el.form || el.closest("form");
    out.push({
      ref, frame: frameIndex, tag, type, role,
      id: el.id || "",
      name: el.getAttribute("name") || "",
      text: norm(isInputButton ? el.value : (el.innerText || el.textContent)),
      value: "value" in el && !isInputButton ? String(el.value ?? "") : "",
      placeholder: el.getAttribute("placeholder") || "",
      aria_label: norm(el.getAttribute("aria-label")),
      label: labelOf(el),
      form_id: form && form.id ? form.id : "",
      ancestors,
      visible: visible(el),
      enabled: !el.disabled && el.getAttribute("aria-disabled") !== "true",
      submit: (tag === "button" && (type === "" || type === "submit") && !!form) || (tag === "input" && type === "submit"),
    });
  }
  return out;
}
"""


class Element(BaseModel):
    """One actionable element as grounding sees it."""

    ref: str
    frame: int = 0
    tag: str
    type: str = ""
    role: str
    id: str = ""
    name: str = ""
    text: str = ""
    value: str = ""
    placeholder: str = ""
    aria_label: str = ""
    label: str = ""
    form_id: str = ""
    ancestors: list[str] = Field(default_factory=list)
    visible: bool = True
    enabled: bool = True
    submit: bool = False
    row: str = ""  # the text of the row, list item or card it sits in (`Target.row`)

    def describe(self) -> str:
        words = self.text or self.label or self.name or self.id
        return f"{self.role} '{words}'" if words else self.role


def take_snapshot(page: Any) -> list[Element]:
    """Every actionable element of the page's frames (main frame first), tagged for acting on."""
    elements: list[Element] = []
    for index, frame in enumerate(page.frames):
        try:
            found = frame.evaluate(_SNAPSHOT_JS, index)
        except Exception:  # noqa: BLE001 - a detached or cross-origin frame has nothing to ground
            continue
        elements.extend(Element.model_validate(item) for item in found)
    return elements


def locate(page: Any, element: Element) -> Any:
    """The Playwright locator of a snapshot element (by its frame and ref)."""
    frame = page.frames[element.frame] if element.frame < len(page.frames) else page.main_frame
    return frame.locator(f'[{REF_ATTRIBUTE}="{element.ref}"]')
