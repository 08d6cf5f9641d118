"""The adversarial suite: deterministic, product-like fixture pages and grounded-step tasks to run on them.

Twelve surfaces (sign-in, search, products, checkout, settings, todo, orders, support ticket, profile,
newsletter, filters, wizard), each with a plain page and variants that change what a recorded workflow
relies on: labels, names, overlays, moved or dead buttons, delays, iframes, injected instructions. The
pages (`pages/<surface>/<variant>.html`) are plain HTML with inline CSS and JavaScript: no network, no
randomness, no clock. Every task's success is a postcondition on what the page shows. Plain tasks pass
with the grounded executor's recovery off; adversarial ones fail without it where the page changed
(see `awm.suite.tasks`), which is what the recovery ablation measures.
"""

from __future__ import annotations

from pathlib import Path

from awm.grounding.model import SuiteTask

PAGES_DIR = Path(__file__).parent / "pages"


def tasks_by_id() -> dict[str, SuiteTask]:
    """Every suite task by its id, in suite order."""
    from awm.suite.tasks import SUITE

    return {task.id: task for task in SUITE}
