"""Compare our pruned observation with BrowserGym's default `flatten_axtree_to_str` on MiniWoB++ pages.

For each task: cl100k tokens of both, the ratio, whether every interactive element BrowserGym shows is
still actionable in ours, and whether the task's own target is present (e.g. click-link's word, the
colour boxes of click-color, the nine cells of tic-tac-toe; BrowserGym's default hides those spans).
Target: ours at most half the tokens with no needed element lost.

Run: python scripts/bench_observation.py [--tasks book-flight,click-link] [--seed 0]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable

from awm.actions import Action
from awm.assets import configure_runtime_env
from awm.config import BrowserSettings
from awm.trajectory import Task
from awm.webarena.env import BrowserSession, PageState

TASKS = [
    "book-flight", "click-link", "login-user", "search-engine", "click-test", "click-button", "enter-text",
    "click-checkboxes", "click-tab", "choose-list", "click-color", "tic-tac-toe", "use-autocomplete",
    "email-inbox", "social-media", "click-dialog", "choose-date", "navigate-tree",
]  # fmt: skip
INTERACTIVE = ("button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "tab", "option",
               "listbox", "spinbutton", "slider", "menuitem", "treeitem", "switch")  # fmt: skip
_LINE = re.compile(r"^\s*\[([A-Za-z]*\d+)\] (\w+)")


def _quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]+)"', goal)


def _target_ok(task: str, goal: str, page: PageState) -> str:
    """A task-specific check that the element the goal needs is actionable; '-' where none applies."""
    lines = [ln for ln in page.text.splitlines() if ln.startswith("[")]
    checks: dict[str, Callable[[], bool]] = {
        "click-link": lambda: any(f"'{_quoted(goal)[0]}'" in ln for ln in lines),
        "click-color": lambda: sum("color=" in ln for ln in lines) >= 2,
        "tic-tac-toe": lambda: sum(" clickable" in ln for ln in lines) >= 9,
        "login-user": lambda: all(
            any(f"'{lab}'" in ln for ln in lines) for lab in ("Username", "Password", "Login")
        ),
        "click-button": lambda: any(f"'{_quoted(goal)[0]}'" in ln for ln in lines),
        "search-engine": lambda: any("textbox" in ln for ln in lines) and any("Search" in ln for ln in lines),
        "book-flight": lambda: sum("textbox" in ln for ln in lines) >= 3,
        "click-tab": lambda: sum(" tab " in ln for ln in lines) >= 2,
        "choose-list": lambda: any("options:" in ln for ln in lines),
    }
    check = checks.get(task)
    if check is None:
        return "-"
    try:
        return "yes" if check() else "NO"
    except IndexError:
        return "NO"


def _measure(
    label: str, name: str, goal: str, page: PageState, obs: dict, enc, flatten
) -> tuple[int, int, int]:
    """Print one row; returns (BrowserGym tokens, our tokens, interactive elements lost)."""
    baseline = flatten(obs["axtree_object"])
    extra = obs["extra_element_properties"]
    theirs, ours = len(enc.encode(baseline)), len(enc.encode(page.text))
    shown = {
        m.group(1) for ln in baseline.splitlines() if (m := _LINE.match(ln)) and m.group(2) in INTERACTIVE
    }
    hidden = {b for b in shown if not (extra.get(b) or {}).get("bbox")}
    lost = shown - hidden - set(page.ids)
    ratio = ours / theirs if theirs else 1.0
    target = _target_ok(name, goal, page) if label == name else "-"
    print(f"{label:<18}{theirs:>11}{ours:>7}{ratio:>7.2f}{len(lost):>6}{len(hidden):>8}{target:>8}")
    return theirs, ours, len(lost)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    configure_runtime_env()
    import tiktoken
    from browsergym.utils.obs import flatten_axtree_to_str

    enc = tiktoken.get_encoding("cl100k_base")
    header = f"{'task':<18}{'BrowserGym':>11}{'ours':>7}{'ratio':>7}{'lost':>6}{'hidden':>8}{'target':>8}"
    print(header)
    print("-" * len(header))
    ratios: list[float] = []
    lost_total = theirs_total = ours_total = 0
    started = time.time()
    with BrowserSession(BrowserSettings(screenshots=False)) as session:
        for name in [t.strip() for t in args.tasks.split(",") if t.strip()]:
            task = Task(
                task_id=f"miniwob.{name}", scope=f"miniwob/{name}", benchmark="miniwob", seed=args.seed
            )
            pages = [(name, session.reset(task), session.last_obs or {})]
            if name == "book-flight":  # the calendar page is the largest MiniWoB tree
                date = next(b for b, t in pages[0][1].elements.items() if t.label == "Departure Date")
                session.execute(Action(name="click", args={"bid": date}))
                pages.append(("book-flight+cal", session.observe(), session.last_obs or {}))
            for label, page, obs in pages:
                row = _measure(label, name, task.goal, page, obs, enc, flatten_axtree_to_str)
                theirs, ours, lost = row
                lost_total += lost
                theirs_total, ours_total = theirs_total + theirs, ours_total + ours
                ratios.append(ours / theirs if theirs else 1.0)
    print("-" * len(header))
    print(
        f"total {theirs_total} vs {ours_total} tokens (ratio {ours_total / max(1, theirs_total):.2f}); "
        f"median ratio {statistics.median(ratios):.2f}, mean {statistics.mean(ratios):.2f}, "
        f"max {max(ratios):.2f}; interactive elements lost: {lost_total}; {time.time() - started:.0f} s"
    )
    print("target: ratio <= 0.50 with no needed element lost ('lost' = interactive elements BrowserGym shows")
    print(
        "that are missing from ours; 'hidden' = zero-size elements both drop from action; 'target' = task check)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
