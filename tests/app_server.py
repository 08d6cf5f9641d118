"""Start `awm serve` the way a person does (a child process on a free loopback port) and look at its pages.

`serve(...)` yields the base URL once `GET /api/runs` answers; `snap(page, name)` saves a screenshot of
the page as a test artefact under `test-artifacts/app/` (AWM_TEST_ARTIFACTS overrides the folder), so a
reviewer can look at every page the tests opened.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("AWM_TEST_ARTIFACTS", REPO / "test-artifacts")) / "app"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(runs: list[Path], *args: str, memory: Path | None = None, timeout_s: float = 60.0) -> Iterator[str]:
    """`awm serve --runs ... --port P [args]` in a child; yields `http://127.0.0.1:P`."""
    port = free_port()
    command = [sys.executable, "-m", "awm.cli", "serve", "--port", str(port)]
    for folder in runs:
        Path(folder).mkdir(parents=True, exist_ok=True)  # `awm serve` refuses a runs folder that is not there
        command += ["--runs", str(folder)]
    if memory is not None:
        command += ["--memory", str(memory)]
    log = (Path(runs[0]).parent / f"serve-{port}.log").open("wb")
    process = subprocess.Popen([*command, *args], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"awm serve exited {process.returncode}: {Path(log.name).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/runs", timeout=5):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"awm serve did not answer in {timeout_s} s") from None
                time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def get_json(url: str) -> tuple[int, Any]:
    """(status, parsed JSON body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def post_json(url: str, body: dict) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def snap(page: Any, name: str) -> Path:
    """A full-page screenshot of `page` kept as a test artefact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
