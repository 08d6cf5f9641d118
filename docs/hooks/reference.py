"""MkDocs hook: fill the generated reference pages (settings, commands) from the code at build time.

The rendering lives in `awm.docs_reference`, where the tests call it without MkDocs.
"""

from __future__ import annotations

from awm.docs_reference import expand_markers


def on_page_markdown(markdown: str, **_: object) -> str:
    return expand_markers(markdown)
