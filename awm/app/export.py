"""`awm traces export RUN [EPISODE] --html OUT.html`: one self-contained file to share a run or an episode.

The same templates as the episode page, with the stylesheet inlined and every screenshot embedded as a
`data:` URL, so the file opens anywhere without a server and shows exactly what the page shows.
"""

from __future__ import annotations

from pathlib import Path

from awm.traces.db import open_run
from awm.trajectory import utc_now

from .catalog import Folder
from .web import STATIC_DIR, TEMPLATES


def export_html(run_dir: Path, episode: str | None = None) -> str:
    """The HTML of one episode (`episode`: id, id prefix or task key) or of every episode of the run."""
    from .server import episode_view_data

    run_dir = Path(run_dir).resolve()
    folder = Folder(key=run_dir.name, path=run_dir, root=run_dir.parent, kind="run")
    with open_run(run_dir) as db:  # one open for the whole file, however many episodes it shows
        run = db.run()
        ids = [db.find_episode(episode).id] if episode is not None else [e.id for e in db.episodes()]
        episodes = [episode_view_data(None, folder, db, episode_id, embed=True) for episode_id in ids]
    title = episodes[0]["episode"].task_key if episode is not None and episodes else f"run {run.name}"
    template = TEMPLATES.env.get_template("export.html")
    return template.render(
        title=title, run=run, episodes=episodes, css=(STATIC_DIR / "app.css").read_text(), exported_at=utc_now()
    )
