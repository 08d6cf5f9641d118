"""`awm llm chat` end to end in a subprocess: replies, usage line, cache, and exit 2 on bad configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from awm.config import PROJECT_ROOT
from awm.llm.local_server import free_port
from tests.stub_llm_server import Reply, StubLLMServer


def run_awm(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "AWM_MODEL", "AWM_BACKEND"}
    }
    clean.update(AWM_HOME=str(home), **env)
    return subprocess.run(
        [sys.executable, "-c", "from awm.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=clean,
        cwd=PROJECT_ROOT,
        timeout=120,
    )


def assert_one_sentence_exit_2(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_chat_prints_reply_and_usage_then_hits_the_cache(tmp_path: Path) -> None:
    with StubLLMServer(
        default=Reply(text="hello there<|im_end|>", prompt_tokens=12, completion_tokens=4)
    ) as stub:
        args = ("llm", "chat", "--backend", "openai", "--model", "gpt-4o-mini", "--max-tokens", "8", "Say hi")
        first = run_awm(*args, home=tmp_path, OPENAI_BASE_URL=stub.base_url)
        second = run_awm(*args, home=tmp_path, OPENAI_BASE_URL=stub.base_url)
        assert len(stub.requests) == 1
        assert stub.requests[0].body["max_tokens"] == 8
    assert first.returncode == 0, first.stderr
    reply, usage = first.stdout.strip().splitlines()
    assert reply == "hello there"
    assert "tokens 12 prompt + 4 completion" in usage and "cached no" in usage and "cost $0.000004" in usage
    assert second.returncode == 0 and "cached yes" in second.stdout


def test_bad_configuration_exits_2_with_one_sentence(tmp_path: Path) -> None:
    assert_one_sentence_exit_2(
        run_awm("llm", "chat", "--backend", "gemini", "hi", home=tmp_path), "unknown LLM backend 'gemini'"
    )
    assert_one_sentence_exit_2(
        run_awm("llm", "chat", "--backend", "openai", "hi", home=tmp_path), "set OPENAI_API_KEY"
    )
    config = tmp_path / "quick.toml"
    config.write_text("[llm]\nmax_attempts = 2\nmax_retry_seconds = 2.0\nmodel = 'x'\n")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_awm(
        "llm",
        "chat",
        "--config",
        str(config),
        "--backend",
        "openai",
        "--no-cache",
        "hi",
        home=tmp_path,
        OPENAI_BASE_URL=dead,
    )
    assert_one_sentence_exit_2(proc, f"LLM endpoint {dead} failed after 2 attempts")
    missing = tmp_path / "missing.toml"
    missing.write_text(f"[llm]\nbackend = 'local'\nlocal_model_path = '{tmp_path / 'nope.gguf'}'\n")
    assert_one_sentence_exit_2(
        run_awm("llm", "chat", "--config", str(missing), "hi", home=tmp_path), "nope.gguf does not exist"
    )
