"""Install, start, reset, stop and inspect a site: the same for every application of the arena.

- `setup`: the site's own virtualenv from its lock file, then its pristine state (`Site.build`) built
  in a scratch folder and moved into place; both are stamped, so a second set-up takes a second.
- `up`: copy the pristine state to live/, start the server on a free loopback port in its own process
  group, wait until it answers, record pid and port in server.json.
- `reset`: copy the pristine state files back over live/ (an atomic rename per file), restarting the
  server on the same port when the site caches state (`Site.restart_on_reset`).
- `down`: stop the server and everything it started; `status`: what a person needs to know.

Why restore files and not undo changes: a copy of a seeded SQLite file is the one reset that cannot
miss a table, and it takes milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from awm.errors import SetupError
from awm.files import write_text_atomic
from awm.proctree import descendants, kill_pids
from awm.sites.site import Site

START_TIMEOUT_S = 60.0
HOST = "127.0.0.1"


@dataclass(frozen=True)
class ServerState:
    """A running server, as server.json records it."""

    pid: int
    port: int
    started_at: float

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


@dataclass(frozen=True)
class SiteStatus:
    """What `awm sites status` prints for one site."""

    name: str
    installed: bool
    seeded: bool
    running: bool
    url: str = ""
    pid: int | None = None
    memory_mb: float | None = None


# --------------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------------


def _stamp(site: Site, kind: str) -> Path:
    return site.root / f".{kind}"


def schema_sql(database: Path) -> str:
    """The CREATE statements of a SQLite database, one per line group, as `Site.schema_file` holds them."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name").fetchall()
    return "".join(f"{sql};\n" for (sql,) in rows)


def is_installed(site: Site) -> bool:
    stamp = _stamp(site, "installed")
    return stamp.is_file() and stamp.read_text().strip() == site.install_stamp()


def is_seeded(site: Site) -> bool:
    stamp = _stamp(site, "seeded")
    return is_installed(site) and stamp.is_file() and stamp.read_text().strip() == site.seed_stamp()


def run_tool(command: list[str], what: str, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SetupError(f"{what} failed (exit {done.returncode}):\n{tail}")


def install(site: Site, *, python: str | None = None) -> bool:
    """The site's virtualenv with exactly its lock file's packages; False when already so."""
    if is_installed(site):
        return False
    down(site)
    shutil.rmtree(site.venv, ignore_errors=True)
    site.root.mkdir(parents=True, exist_ok=True)
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    run_tool([base, "-m", "venv", str(site.venv)], f"creating the virtualenv of {site.name}")
    run_tool(
        [str(site.venv_bin("python")), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "-r", str(site.requirements_file)],
        f"installing {site.package} ({site.requirements_file.name})",
    )  # fmt: skip
    write_text_atomic(_stamp(site, "installed"), site.install_stamp() + "\n")
    _stamp(site, "seeded").unlink(missing_ok=True)
    return True


def seed(site: Site) -> bool:
    """Build the pristine state (in a scratch folder, then moved into place); False when current."""
    if is_seeded(site):
        return False
    if not is_installed(site):
        raise SetupError(f"site {site.name} is not installed: run `awm sites setup --site {site.name}`")
    down(site)
    scratch = site.root / "pristine.building"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        site.build(scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    shutil.rmtree(site.pristine, ignore_errors=True)
    scratch.rename(site.pristine)
    shutil.rmtree(site.live, ignore_errors=True)
    write_text_atomic(_stamp(site, "seeded"), site.seed_stamp() + "\n")
    return True


def setup(site: Site) -> list[str]:
    """Install and seed `site` as needed; what was done, in words (empty: nothing to do)."""
    done = []
    if install(site):
        done.append(f"installed {site.package}")
    if seed(site):
        done.append("seeded its pristine state")
    return done


# --------------------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not a server
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def server_state(site: Site) -> ServerState | None:
    """The running server, or None (a stale server.json of a dead process is removed)."""
    try:
        data = json.loads(site.state_file.read_text())
        state = ServerState(pid=int(data["pid"]), port=int(data["port"]), started_at=float(data["started_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(state.pid):
        site.state_file.unlink(missing_ok=True)
        return None
    return state


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback http URL we built
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500  # 401/403/404 still mean the server is up
    except (OSError, ValueError):
        return False


def _start(site: Site, port: int) -> ServerState:
    command = site.server_command(site.live, port)
    log = site.log_file.open("ab")
    try:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=site.live,
            env={**os.environ, **site.server_env(site.live)}, start_new_session=True,
        )  # fmt: skip
    finally:
        log.close()
    state = ServerState(pid=process.pid, port=port, started_at=time.time())
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "\n".join(site.log_file.read_text(errors="replace").splitlines()[-10:])
            raise SetupError(f"site {site.name} exited at start (code {process.returncode}):\n{tail}")
        if _answers(state.url + site.ready_path):
            write_text_atomic(
                site.state_file, json.dumps({"pid": state.pid, "port": port, "started_at": state.started_at}) + "\n"
            )
            return state
        time.sleep(0.05)
    _stop_pid(process.pid)
    raise SetupError(f"site {site.name} did not answer on {state.url} within {START_TIMEOUT_S:.0f} s")


def _restore(site: Site) -> None:
    """Copy the pristine state files over live/ (each through a temporary file and a rename)."""
    for relative in site.state_files:
        source, target = site.pristine / relative, site.live / relative
        if source.is_dir():
            fresh = target.with_name(target.name + ".restoring")
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.copytree(source, fresh)
            old = target.with_name(target.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            if target.exists():
                target.rename(old)
            fresh.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".restoring")
            shutil.copyfile(source, tmp)
            tmp.replace(target)
            for suffix in ("-journal", "-wal", "-shm"):
                Path(str(target) + suffix).unlink(missing_ok=True)
        else:
            raise SetupError(f"site {site.name}: {relative} is missing from its pristine state; run setup again")


def up(site: Site) -> ServerState:
    """The site's server, started on a fresh copy of its pristine state if it was not running."""
    state = server_state(site)
    if state is not None:
        return state
    if not is_seeded(site):
        raise SetupError(f"site {site.name} is not set up: run `awm sites setup --site {site.name}`")
    shutil.rmtree(site.live, ignore_errors=True)
    shutil.copytree(site.pristine, site.live)
    return _start(site, free_port())


def reset(site: Site) -> ServerState:
    """Back to the pristine state (the server keeps its port); starts the server if it was down."""
    state = server_state(site)
    if state is None:
        return up(site)
    if site.restart_on_reset:
        _stop_pid(state.pid)
        site.state_file.unlink(missing_ok=True)
        _restore(site)
        return _start(site, state.port)
    _restore(site)
    return state


def _stop_pid(pid: int) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever of it is left after 3 s."""
    tree = descendants(pid) | {pid}
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(_alive(p) for p in tree):
        time.sleep(0.02)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    kill_pids({p for p in tree if _alive(p)})
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def down(site: Site) -> bool:
    """Stop the site's server; False when it was not running."""
    state = server_state(site)
    site.state_file.unlink(missing_ok=True)
    if state is None:
        return False
    _stop_pid(state.pid)
    return True


def instances(site: Site) -> list[str]:
    """The named copies of a site made so far (workers' own, `Site.instance`), whether running or not."""
    folder = site.root / "instances"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _rss_mb(pid: int) -> float | None:
    total = 0
    for p in descendants(pid) | {pid}:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return round(total / 1024, 1) if total else None


def status(site: Site) -> SiteStatus:
    state = server_state(site)
    return SiteStatus(
        name=site.name,
        installed=is_installed(site),
        seeded=is_seeded(site),
        running=state is not None,
        url=state.url if state else "",
        pid=state.pid if state else None,
        memory_mb=_rss_mb(state.pid) if state else None,
    )
