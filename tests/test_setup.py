"""Set-up, assets, config and doctor: the parts every run stands on."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awm import assets
from awm.config import config_hash, load_settings
from awm.errors import ConfigError, SetupError

AWM = [sys.executable, "-c", "from awm.cli import main; main()"]


def test_quicktok_conversion_matches_tiktoken_pinned_hash():
    """The o200k file is converted from quicktok's binary vocab: it must match tiktoken's sha256 byte for byte."""
    sources = assets._tiktoken_sources()
    for name, (_url, expected) in assets.TIKTOKEN_FILES.items():
        assert hashlib.sha256(sources[name]).hexdigest() == expected, name


def test_tiktoken_cache_is_complete_and_offline(tmp_path):
    built = assets.build_tiktoken_cache(tmp_path)
    assert sorted(built) == sorted(assets.TIKTOKEN_FILES)
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "import tiktoken\n"
        "print(len(tiktoken.get_encoding('o200k_base').encode('hello world')))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(assets.tiktoken_cache_dir(tmp_path))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2"


def test_model_assembly_is_verified_and_idempotent():
    path = assets.assemble_model()
    assert assets.model_is_verified(path)
    mtime = path.stat().st_mtime_ns
    assert assets.assemble_model() == path
    assert path.stat().st_mtime_ns == mtime, "a second set-up must not rewrite the model"


def test_wrong_model_file_is_a_clear_error(tmp_path):
    fake = tmp_path / assets.MODEL_FILENAME
    fake.write_bytes(b"GGUF not really")
    with pytest.raises(SetupError, match="wrong size or sha256"):
        assets.verify_model_file(fake)
    with pytest.raises(SetupError, match="does not exist"):
        assets.verify_model_file(tmp_path / "missing.gguf")


def test_corrupt_marker_is_not_trusted(tmp_path):
    fake = tmp_path / assets.MODEL_FILENAME
    fake.write_bytes(b"x" * 10)
    fake.with_suffix(fake.suffix + ".verified").write_text("something else")
    assert not assets.model_is_verified(fake)


def test_playwright_bridge_points_at_system_chromium(tmp_path):
    link = assets.bridge_playwright(tmp_path)
    assert link.is_symlink()
    assert link.resolve() == assets.system_chromium().resolve()
    assert assets.bridge_playwright(tmp_path) == link  # idempotent


def test_settings_layering_and_errors(tmp_path, monkeypatch):
    config = tmp_path / "x.toml"
    config.write_text('[llm]\nbackend = "openai"\nmodel = "gpt-4o"\nmax_tokens = 99\n')
    monkeypatch.setenv("AWM_MODEL", "gpt-4o-mini")
    settings = load_settings(config, overrides={"llm": {"max_tokens": 7}})
    assert settings.llm.backend == "openai"
    assert settings.llm.model == "gpt-4o-mini"  # environment beats file
    assert settings.llm.max_tokens == 7  # flags beat environment
    config.write_text('[llm]\nbackend = "gpt5"\n')
    with pytest.raises(ConfigError, match="llm.backend"):
        load_settings(config)
    config.write_text("[llm\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(config)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_config_hash_ignores_secrets_but_not_behaviour():
    a = load_settings(overrides={"llm": {"api_key": "one"}})
    b = load_settings(overrides={"llm": {"api_key": "two"}})
    c = load_settings(overrides={"llm": {"temperature": 0.7}})
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(c)


def test_auto_backend_prefers_a_configured_endpoint(monkeypatch):
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert load_settings().llm.resolved_backend() == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert load_settings().llm.resolved_backend() == "anthropic"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert load_settings().llm.resolved_backend() == "openai"


def test_doctor_reports_ready_and_missing(tmp_path):
    ready = subprocess.run([*AWM, "doctor", "--json"], capture_output=True, text=True)
    assert ready.returncode == 0, ready.stdout + ready.stderr
    env = {**os.environ, "AWM_HOME": str(tmp_path)}
    env.pop("PLAYWRIGHT_BROWSERS_PATH", None)
    missing = subprocess.run([*AWM, "doctor"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1
    assert "model file" in missing.stdout and "make setup" in missing.stdout


def test_user_error_is_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[llm]\nbackend = "nonsense"\n')
    out = subprocess.run([*AWM, "llm", "chat", "--config", str(bad), "hi"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert Path(bad).name in out.stderr or "backend" in out.stderr
