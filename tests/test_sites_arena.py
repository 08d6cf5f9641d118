"""The arena end to end in real Chromium: every template validated by its demonstration (the check fails
on the pristine site and passes after the scripted replay), an instance as a plain BrowserGym task
(`gym.make`), a login task run through the one driver leaving no trace of the password anywhere in its
run folder, a two-arm ablation on one Trac template with the scripted policy, and one episode in which
the embedded model calls a workflow on a Trac template.

Uses the sites that `make test`'s set-up installs (`awm sites setup`); one train instance per template
here, all of them in `awm sites check --all`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.sites import lifecycle
from awm.sites.registry import SITES, get_site
from awm.sites.templates import load_templates

pytestmark = [pytest.mark.sites, pytest.mark.browser]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def sites_are_set_up() -> None:
    for name in SITES:
        if not lifecycle.is_seeded(get_site(name)):
            pytest.fail(f"site {name} is not set up: run `awm sites setup` (make test does)")


@pytest.mark.parametrize("name", sorted(SITES))
def test_each_schema_file_matches_its_seeded_database(name: str) -> None:
    site = get_site(name)
    assert lifecycle.schema_sql(site.pristine / site.database_file) == site.schema_file.read_text(), (
        f"{site.schema_file} is stale: write it again from lifecycle.schema_sql() of the pristine database"
    )


@pytest.fixture(scope="module")
def site_checks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[subprocess.Popen, Path]]]:
    """`awm sites check --site NAME` as a user runs it, for the three sites at once, each in its own
    process (its own browser; the sites are separate servers and databases, so nothing is shared).

    Why at once: one check spends most of its time waiting (each sub-step's observation delay, the
    site's answer), so on two cores the three take about as long together as the longest alone.
    Why in their own processes: inside this test process (a heap grown by a thousand earlier tests)
    the same replays took ~3x as long (473 s against 162 s for the shop, measured 2026-12-03)."""
    started: dict[str, tuple[subprocess.Popen, Path]] = {}
    for name in sorted(SITES):
        out = tmp_path_factory.mktemp(f"check-{name}")
        with (out / "output.txt").open("w") as log:
            command = [sys.executable, "-m", "awm.cli", "sites", "check", "--site", name, "--out", str(out)]
            started[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), out)
    yield started
    for process, _ in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("name", sorted(SITES))
def test_every_template_fails_before_and_passes_after_its_demonstration(
    name: str, site_checks: dict[str, tuple[subprocess.Popen, Path]]
) -> None:
    import json

    process, out = site_checks[name]
    returncode = process.wait(timeout=900)
    output = (out / "output.txt").read_text()
    assert (out / "check.json").is_file(), output[-4000:]
    results = json.loads((out / "check.json").read_text())
    templates = [t for t in load_templates().values() if t.site == name]
    assert len(templates) >= 10 and all(len(t.instance) >= 6 for t in templates)
    assert {r["key"] for r in results} == {t.key for t in templates}, "one train instance of every template was checked"
    bad = [f"{r['key']}#{r['instance']}: before={r['before']!r} after={r['after']!r}" for r in results if not r["ok"]]
    assert not bad, "\n".join(bad)
    assert returncode == 0, output[-4000:]
    assert (out / "CHECK.md").is_file() and f"{len(templates)} of {len(templates)} instance(s) ok" in output


def test_an_instance_is_a_plain_browsergym_task() -> None:
    import gymnasium as gym

    import awm.sites.task  # noqa: F401  (registers browsergym/sites.*)

    template = next(t for t in load_templates().values() if t.check.answer is not None and t.site == "trac")
    number = template.numbers("test")[0]
    env = gym.make(f"browsergym/sites.{template.key}", headless=True)
    try:
        obs, info = env.reset(seed=number)
        assert obs["goal"] == template.goal_for(number)
        assert info["task_info"]["split"] == "test" and info["task_info"]["site_url"].startswith("http://127.0.0.1:")
        _, reward, terminated, _, info = env.step("send_msg_to_user('I do not know')")
        assert (reward, terminated) == (0.0, True)  # a wrong answer ends the episode unsolved
        assert "FAILED" in info["task_info"]["check"]
    finally:
        env.close()


@pytest.fixture(scope="module")
def login_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, subprocess.CompletedProcess]:
    """A forum login template's train instance solved by its demonstration through `awm run` (no model):
    (the run folder, the account's password, the finished process)."""
    template = next(t for t in load_templates().values() if t.login is not None and t.site == "forum")
    number = template.numbers("train")[0]
    password = get_site(template.site).account(template.login or "").password
    out = tmp_path_factory.mktemp("login") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "run", "--benchmark", "sites", "--tasks", f"{template.key}#{number}",
         "--policy", "scripted", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out, password, done


def test_a_login_task_leaves_no_trace_of_the_password(login_run: tuple[Path, str, subprocess.CompletedProcess]) -> None:
    out, password, done = login_run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".png" for p in files) and any(p.name == "run.sqlite" for p in files)
    leaked = [str(p) for p in files if password.encode() in p.read_bytes()]
    assert not leaked, f"the password is written in {leaked}"
    text = "\n".join(p.read_text(errors="replace") for p in files if p.suffix in (".json", ".jsonl", ".md", ".html"))
    assert "{password}" in text  # what was typed is recorded as the placeholder
    assert password not in done.stdout + done.stderr


def test_replay_admission_on_a_real_site_keeps_what_the_check_said_and_refuses_a_workflow_that_stops_short(
    login_run: tuple[Path, str, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    from awm.config import BrowserSettings
    from awm.induction.rule import induce_rule
    from awm.pipeline.replay import ReplayGate, verify_candidates
    from awm.trajectory import load_trajectories

    out, password, _ = login_run
    [demonstration] = load_trajectories(out / "trajectories")
    [good, log_in], _ = induce_rule([demonstration], admission="gt", parts=True)
    assert [s.action for s in log_in.steps] == ["click", "fill", "fill", "click"] and log_in.provenance.part_of == good.name
    short = good.model_copy(update={"name": "stops short", "steps": good.steps[:-1]})  # never opens the profile
    short_log_in = log_in.model_copy(update={"name": "its log in", "provenance": log_in.provenance.model_copy(update={"part_of": short.name})})
    gate = ReplayGate(tmp_path, BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0))
    try:
        passed, refused = verify_candidates(gate, [good, log_in, short, short_log_in], [demonstration])
    finally:
        gate.close()
    assert [w.name for w in passed] == [good.name, log_in.name]  # a part is admitted with its whole's replay
    assert passed[1].provenance.replay_trajectory_id == passed[0].provenance.replay_trajectory_id
    verdict = passed[0].provenance.replay_verdict
    assert verdict.startswith("success (") and "FAILED" not in verdict  # what the site's check found, in words
    replay = tmp_path / "replays" / f"{passed[0].provenance.replay_trajectory_id}.json"
    assert replay.is_file() and password not in replay.read_text()
    why, part_why = refused
    assert why.startswith("stops short: every step ran, but the task did not succeed (reward 0.0): ") and "FAILED" in why
    assert part_why == "its log in: a part of 'stops short', which was not admitted"


# A hosted model's answer (the stub stands in for a paid API): AWM's text format, targets by role and label.
HOSTED_ANSWER = """## open_starter_profile
Open the profile of the member who started a discussion, logged in.

I open the log-in page.
click('[link] Log in')

I type the username.
fill('[textbox] Username:', '{user}')

I type the password.
fill('[textbox] Password:', '{password}')

I log in.
click('[button] Login')

I open the discussion the goal names.
click('[link] {title}')

I open the profile of who started it.
click('[link] {author}')
"""


def test_neural_induction_by_a_hosted_model_is_admitted_by_a_replay_on_a_real_site(
    login_run: tuple[Path, str, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    """Neural induction on the arena: the prompt shows the demonstration by role and label with the
    password as its placeholder, the answer becomes an executable workflow, and the replay on the
    source instance (values read off its steps, the password typed from the secret) admits it."""
    from awm.config import BrowserSettings, load_settings
    from awm.induction.neural import induce_neural
    from awm.llm.factory import make_client
    from awm.pipeline.replay import ReplayGate, verify_candidates
    from awm.tokens import CharEstimateCounter
    from awm.trajectory import load_trajectories
    from tests.stub_llm_server import Reply, StubLLMServer

    out, password, _ = login_run
    [demonstration] = load_trajectories(out / "trajectories")
    with StubLLMServer([Reply(text=HOSTED_ANSWER)]) as stub:
        settings = load_settings(overrides={"llm": {"backend": "openai", "base_url": stub.base_url, "api_key": "x", "model": "stub", "cache": False}})
        [workflow], _ = induce_neural([demonstration], client=make_client(settings), admission="gt", counter=CharEstimateCounter())
        prompt = "\n".join(m["content"] for m in stub.requests[0].body["messages"])
    assert "fill('[textbox] Password:', '{password}')" in prompt and password not in prompt
    assert workflow.provenance.mode == "neural" and workflow.parameters == ["user", "password", "title", "author"]
    gate = ReplayGate(tmp_path, BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0))
    try:
        passed, refused = verify_candidates(gate, [workflow], [demonstration])
    finally:
        gate.close()
    assert refused == [] and [w.name for w in passed] == ["open_starter_profile"]
    assert passed[0].provenance.replay_verdict.startswith("success (")


@pytest.mark.llm
def test_one_episode_with_the_embedded_model_calls_a_workflow_on_a_trac_template(tmp_path: Path, local_llm) -> None:
    """AWM's offline setting on a real site, end to end: a train instance's demonstration replayed (no
    model), a workflow induced from it and admitted by its replay, and the embedded model, on a test
    instance, calling it as one action whose sub-steps run under that call."""
    from awm.config import load_settings
    from awm.llm.usage import UsageMeter
    from awm.pipeline.config import parse_pipeline_table
    from awm.pipeline.driver import run_arm
    from awm.pipeline.stages import Clients

    template = next(t for t in load_templates().values() if t.site == "trac" and t.kind == "navigation")
    train, test = template.numbers("train")[0], template.numbers("test")[0]
    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False, "max_tokens": 96}})
    clients = Clients(settings, UsageMeter(), actor=local_llm)
    demos = parse_pipeline_table(
        {"name": "arena-demos", "benchmark": "sites", "tasks": [f"{template.key}#{train}"], "policy": "scripted",
         "memory": "off", "episode_timeout_s": 240},
        source="test",
    )  # fmt: skip
    assert run_arm(demos, settings, tmp_path / "demos", show_progress=False, clients=clients).failed_stage is None
    arm = parse_pipeline_table(
        {"name": "arena-llm", "benchmark": "sites", "tasks": [f"{template.key}#{test}"], "policy": "llm",
         "memory": "offline", "workflows": "executable", "offline_from": [str(tmp_path / "demos")], "max_steps": 4,
         "episode_timeout_s": 240},
        source="test",
    )  # fmt: skip
    result = run_arm(arm, settings, tmp_path / "run", show_progress=False, clients=clients)
    assert result.failed_stage is None, result.error
    [trajectory] = result.trajectories
    assert trajectory.task.scope == template.scope and trajectory.steps
    assert trajectory.steps[0].llm_calls >= 1 and trajectory.steps[0].observation
    calls = [s for s in trajectory.steps if s.called_by is None and (s.action or {}).get("name") == "run_workflow"]
    assert calls, [s.action_str for s in trajectory.steps]
    assert any(s.called_by == calls[0].index for s in trajectory.steps)  # its sub-steps, traced under it
    assert trajectory.verdict.reward in (0.0, 1.0)
    assert trajectory.meta["env_info"]["gate"].startswith("not consulted")
    assert trajectory.end != "env_error", trajectory.steps[-1].error


def test_a_two_arm_ablation_on_one_arena_template_with_the_scripted_policy(tmp_path: Path) -> None:
    """`awm ablate` on a real site, no model: memory off against online executable memory on one Trac
    template's two test instances, each solved by its demonstration. The online arm commits a version
    after each solved instance (its workflow replayed on the instance before it is kept), and the second
    instance sees the first's; the report pairs the arms by instance."""
    import json
    import textwrap

    from awm.pipeline.ablation import load_ablation, run_ablation

    template = next(t for t in load_templates().values() if t.site == "trac" and t.kind == "navigation")
    first, second = template.numbers("test")[:2]
    config = tmp_path / "ablate.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [pipeline]
            name = "arena"
            benchmark = "sites"
            tasks = ["{template.key}"]
            seeds = [{first}, {second}]
            policy = "scripted"
            episode_timeout_s = 240

            [[arm]]
            name = "off"
            memory = "off"

            [[arm]]
            name = "online"
            memory = "online"
            workflows = "executable"
            induction = "rule"
            admission = "gt"
            """
        )
    )
    out = tmp_path / "out"
    run_ablation(load_ablation(config), out, show_progress=False)
    data = json.loads((out / "results.json").read_text())
    assert [(a["name"], a["episodes"], a["successes"]) for a in data["arms"]] == [("off", 2, 2), ("online", 2, 2)]
    assert data["arms"][1]["final_versions"] == {template.scope: 2}  # a version after each solved instance
    seen = [e["memory_version_seen"] for e in data["episodes"] if e["arm"] == "online"]
    assert seen == [None, 1]
    [pair] = data["comparisons"]
    assert (pair["pairs"], pair["ties"]) == (2, 2)
