"""`awm serve`: the live application. Server-rendered pages (Jinja2) over one JSON API (FastAPI), live
runs streamed as server-sent events; everything it serves comes from the package (no build step, no CDN).

Modules: `catalog` finds the served run folders and resolves every path a request names (nothing outside
them is ever read); `runs` turns run databases into page rows; `server` builds the application and its
run and episode routes; `memory_pages` and `ablation_pages` are the memory browser and the ablation
report; `live` starts live runs as child processes and streams their events; `serve_cli` is the command;
`export` renders a run or an episode as one self-contained HTML file, and `export_cli` is
`awm traces export`, which `awm.cli` mounts on the traces app (nothing below the app imports it).
"""
