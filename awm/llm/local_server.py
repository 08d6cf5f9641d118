"""The embedded local model: llama.cpp's OpenAI-compatible server (via `xllamacpp`) in a child process.

Why a child process: the server holds ~1.5 GB and its own threads; keeping it out of our process means a
crash or a hang in llama.cpp never takes a run with it, and every backend talks HTTP the same way.
One server per process is started on first use, reused, and stopped at exit; the child also exits by
itself when its parent dies (it watches its parent pid), so no server outlives a killed run.

Run by hand: ``python -m awm.llm.local_server --model F --port P --ctx N --threads T``.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from awm.errors import LLMError, SetupError

HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0
LOG_TAIL_CHARS = 1500


@dataclass
class _Running:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path


# One server per (model, ctx, threads) in this process: the "one server per process" the callers rely on.
_SERVERS: dict[tuple[str, int, int], _Running] = {}
_LOCK = threading.Lock()


def free_port() -> int:
    """A port that was free a moment ago (the child binds it; a lost race shows up as a failed start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def health_ok(root_url: str, timeout: float = 2.0) -> bool:
    """True when `GET /health` says the model is loaded (llama.cpp answers 503 while loading)."""
    try:
        with urllib.request.urlopen(f"{root_url}/health", timeout=timeout) as response:  # noqa: S310 - local URL
            return response.status == 200 and json.loads(response.read() or b"{}").get("status") == "ok"
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a log on one line (all of it when `chars` is 0)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " ".join(text[-chars if chars else 0 :].split())


def _stop(running: _Running) -> None:
    """Terminate the server's process group; kill it if it does not exit within 5 s."""
    process = running.process
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=5)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.wait(timeout=5)


def stop_all_servers() -> None:
    """Stop every server this process started (registered with atexit)."""
    with _LOCK:
        running = list(_SERVERS.values())
        _SERVERS.clear()
    for server in running:
        _stop(server)


atexit.register(stop_all_servers)


def _start(
    model_file: Path, n_ctx: int, threads: int, log_dir: Path, timeout_s: float, port: int | None, slots: int
) -> _Running:
    port = port or free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"llama-server-{port}.log"
    command = [
        sys.executable, "-m", "awm.llm.local_server",
        "--model", str(model_file), "--port", str(port), "--ctx", str(n_ctx), "--threads", str(threads),
        "--slots", str(slots), "--parent-pid", str(os.getpid()),
    ]  # fmt: skip
    if threading.current_thread() is threading.main_thread():
        command.append("--die-with-parent")
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    running = _Running(process, f"http://{HOST}:{port}/v1", log_path)
    root = f"http://{HOST}:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if "couldn't bind" in _log_tail(log_path, 0):
                raise LLMError(
                    f"the embedded llama.cpp server could not bind {HOST}:{port} (port in use); see {log_path}"
                )
            raise LLMError(
                f"the embedded llama.cpp server exited with code {process.returncode} while starting "
                f"(model {model_file}); log {log_path}: {_log_tail(log_path)}"
            )
        if health_ok(root):
            return running
        time.sleep(0.2)
    _stop(running)
    raise LLMError(
        f"the embedded llama.cpp server did not become healthy within {timeout_s:.0f} s "
        f"(model {model_file}); see {log_path}"
    )


def ensure_local_server(
    model_file: Path,
    *,
    n_ctx: int,
    threads: int,
    log_dir: Path | None = None,
    timeout_s: float = START_TIMEOUT_S,
    port: int | None = None,
    slots: int = 1,
) -> str:
    """Base URL (``http://127.0.0.1:PORT/v1``) of the embedded server for this model; starts one if needed.

    Cheap when the server runs (no HTTP round trip), so clients may call it before every request; a
    server that died is replaced by a new one.

    The caller verifies the model file first (`awm.assets.verify_model_file`); logs go to
    `log_dir` (default: the awm home's ``logs/``). `port` fixes the port (default: any free one).
    `slots` requests are served at once (parallel workers share one server), each with `n_ctx` tokens.
    """
    key = (str(Path(model_file).resolve()), int(n_ctx), int(threads), int(slots))
    with _LOCK:
        running = _SERVERS.get(key)
        if running is not None:
            if running.process.poll() is None:  # alive: reuse (a busy server may be slow to answer /health)
                return running.base_url
            _stop(running)
            del _SERVERS[key]
        if importlib.util.find_spec("xllamacpp") is None:
            raise SetupError(
                "the embedded model needs the xllamacpp package; run `pip install -c requirements.lock xllamacpp`"
            )
        if log_dir is None:
            from awm.config import awm_home

            log_dir = awm_home() / "logs"
        try:
            running = _start(Path(model_file), int(n_ctx), int(threads), Path(log_dir), timeout_s, port, slots)
        except LLMError as exc:
            if port is not None or "could not bind" not in str(exc):
                raise
            # Another process took the free port between our probe and the server's bind: try once more.
            running = _start(Path(model_file), int(n_ctx), int(threads), Path(log_dir), timeout_s, None, slots)
        _SERVERS[key] = running
        return running.base_url


def wait_for_server(base_url: str) -> int:
    """Block until the server behind `base_url` (started by this process) exits; return its exit code.

    Ctrl-C stops it (used by `awm llm serve`, which runs the server in the foreground).
    """
    with _LOCK:
        running = next((r for r in _SERVERS.values() if r.base_url == base_url), None)
    if running is None:
        raise LLMError(f"no embedded server at {base_url} was started by this process")
    try:
        return running.process.wait()
    except KeyboardInterrupt:
        _stop(running)
        return 0


# --- the child process ---------------------------------------------------------------------------


def serve(
    model: Path,
    port: int,
    n_ctx: int,
    threads: int,
    parent_pid: int | None,
    alias: str | None = None,
    die_with_parent: bool = False,
    slots: int = 1,
) -> None:
    """Run llama.cpp's server in this process until SIGTERM/SIGINT or until the parent process dies."""
    if parent_pid is not None:
        if die_with_parent:
            _set_parent_death_signal()
        if os.getppid() != parent_pid:
            os._exit(0)
        threading.Thread(
            target=_exit_when_orphaned, args=(parent_pid,), name="parent-watch", daemon=True
        ).start()
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = n_ctx * slots  # llama.cpp splits the context among its slots
    params.n_parallel = slots
    params.port = port
    params.hostnames = [HOST]
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    params.cache_prompt = True
    params.model_alias = {alias or model.stem}
    server = xllamacpp.Server(params)  # loads the model, then serves on its own threads
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    print(f"awm: llama.cpp server for {model.name} on http://{HOST}:{port}/v1", flush=True)
    stop.wait()
    del server
    os._exit(0)  # llama.cpp's threads do not all join cleanly; the OS reclaims everything


def _set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL us when the thread that started us exits (PR_SET_PDEATHSIG).

    Needed because llama.cpp holds the GIL while it loads the model, so the watch thread cannot run
    then. Only requested when the parent started us from its main thread: the kernel ties the signal
    to that thread, and a worker thread that ends would otherwise take the server with it.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _exit_when_orphaned(parent_pid: int) -> None:
    """Exit the server process as soon as its parent is gone (we get re-parented); runs once the
    model is loaded, and covers parents that could not use the death signal."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m awm.llm.local_server", description="Serve a GGUF model.")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--alias", default=None)
    parser.add_argument(
        "--die-with-parent", action="store_true", help="Linux: SIGKILL when the parent exits."
    )
    args = parser.parse_args(argv)
    serve(
        args.model, args.port, args.ctx, args.threads, args.parent_pid, args.alias, args.die_with_parent, args.slots
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
