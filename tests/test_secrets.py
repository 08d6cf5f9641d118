"""Secrets: a password the agent types by its placeholder and nobody reads. The redaction itself, and a
sign-in on a page a user names (`awm run --url ... --secret password=ENV_VAR`) that works with the real
value while the run folder holds only the placeholder; a password field takes nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awm.errors import ConfigError
from awm.secrets import Secrets, secrets_from_env
from awm.trajectory import Step
from tests.stub_llm_server import Reply, StubLLMServer, stub_settings_file

REPO = Path(__file__).resolve().parents[1]
VALUE = "sesame-42-open"  # what tests/fixtures/pages/secret_signin.html accepts
USER_BID, PASSWORD_BID, SIGN_IN_BID = "7", "9", "10"  # BrowserGym's ids on that page


def test_values_are_replaced_by_their_placeholder_everywhere() -> None:
    secrets = Secrets({"password": VALUE, "pin": "4242"})
    assert secrets.named("{password}") == "password" and secrets.named(" {pin} ") == "pin"
    assert secrets.named("{other}") is None and secrets.named("password") is None
    assert secrets.redact(f"typed {VALUE} and 4242") == "typed {password} and {pin}"
    step = Step(index=0, observation=f"field shows {VALUE}", action={"name": "fill", "args": {"value": VALUE}})
    clean = secrets.redact_model(step)
    assert VALUE not in clean.model_dump_json() and clean.action == {"name": "fill", "args": {"value": "{password}"}}
    assert Secrets().redact(VALUE) == VALUE and not Secrets()


def test_only_a_password_field_reads_a_secret_s_bare_name_as_the_secret() -> None:
    secrets = Secrets({"password": VALUE})
    assert [secrets.named_in_password_field(v) for v in ("password", " Password ", "{password}")] == ["password"] * 3
    assert secrets.named_in_password_field("hunter2") is None and secrets.named_in_password_field("") is None
    assert secrets.named("password") is None  # anywhere else the word is just a word


def test_secrets_come_from_named_environment_variables() -> None:
    assert secrets_from_env(["password=SHOP_PW"], {"SHOP_PW": VALUE}) == {"password": VALUE}
    assert secrets_from_env({"password": "SHOP_PW"}, {"SHOP_PW": VALUE}) == {"password": VALUE}
    with pytest.raises(ConfigError, match="expected NAME=ENV_VAR"):
        secrets_from_env(["password"], {})
    with pytest.raises(ConfigError, match="SHOP_PW is not set"):
        secrets_from_env(["password=SHOP_PW"], {})


def awm_run(tmp_path: Path, base_url: str, replies: list[Reply], *extra: str, stdin: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "run"
    with StubLLMServer(replies) as stub:
        done = subprocess.run(
            [sys.executable, "-m", "awm.cli", "run", "--url", f"{base_url}secret_signin.html",
             "--goal", "Sign in as ada with the password {password}", "--allow-host", "127.0.0.1",
             "--config", str(stub_settings_file(tmp_path, stub.base_url)), "--out", str(out), *extra],
            capture_output=True, text=True, cwd=REPO, timeout=240, input=stdin,
            env={**os.environ, "AWM_TEST_SECRET": VALUE},
        )  # fmt: skip
    return done, out


@pytest.mark.browser
def test_a_named_secret_signs_in_and_no_record_holds_it(base_url: str, tmp_path: Path) -> None:
    replies = [
        Reply(text=f"fill('{USER_BID}', 'ada')"),
        Reply(text=f"fill('{PASSWORD_BID}', '{{password}}')"),
        Reply(text=f"click('{SIGN_IN_BID}')"),
        Reply(text="send_msg_to_user('Signed in')"),
    ]
    done, out = awm_run(
        tmp_path, base_url, replies, "--secret", "password=AWM_TEST_SECRET", "--confirm", stdin="y\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = list((out / "trajectories").glob("*.json"))
    trajectory = json.loads(path.read_text())
    typed = trajectory["steps"][1]
    assert typed["outcome"] == "ok" and "typed the secret {password}" in typed["feedback"]
    assert any("Signed in as ada" in s["observation"] for s in trajectory["steps"]), "the page took the real value"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert [str(p) for p in files if VALUE.encode() in p.read_bytes()] == []
    assert VALUE not in done.stdout + done.stderr


@pytest.mark.browser
def test_the_bare_name_of_a_secret_in_a_password_field_types_the_secret(base_url: str, tmp_path: Path) -> None:
    replies = [
        Reply(text=f"fill('{USER_BID}', 'ada')"),
        Reply(text=f"fill('{PASSWORD_BID}', 'password')"),  # the placeholder without its braces
        Reply(text=f"click('{SIGN_IN_BID}')"),
        Reply(text="send_msg_to_user('Signed in')"),
    ]
    done, out = awm_run(
        tmp_path, base_url, replies, "--secret", "password=AWM_TEST_SECRET", "--confirm", stdin="y\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = list((out / "trajectories").glob("*.json"))
    trajectory = json.loads(path.read_text())
    assert trajectory["steps"][1]["outcome"] == "ok" and "typed the secret {password}" in trajectory["steps"][1]["feedback"]
    assert any("Signed in as ada" in s["observation"] for s in trajectory["steps"]), "the page took the real value"
    assert [str(p) for p in out.rglob("*") if p.is_file() and VALUE.encode() in p.read_bytes()] == []


@pytest.mark.browser
def test_a_password_field_takes_only_a_named_secret(base_url: str, tmp_path: Path) -> None:
    typed_value = [Reply(text=f"fill('{PASSWORD_BID}', 'hunter2')")]
    done, out = awm_run(tmp_path, base_url, typed_value, "--secret", "password=AWM_TEST_SECRET")
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = list((out / "trajectories").glob("*.json"))
    first = json.loads(path.read_text())["steps"][0]
    assert first["outcome"] in ("refused", "action_error") and "password field" in first["error"]
    # Without --secret a password field is refused outright, placeholder or not.
    placeholder = [Reply(text=f"fill('{PASSWORD_BID}', '{{password}}')")]
    done, out = awm_run(tmp_path / "plain", base_url, placeholder)
    [path] = list((out / "trajectories").glob("*.json"))
    first = json.loads(path.read_text())["steps"][0]
    assert first["outcome"] == "refused" and "password field" in first["error"]
