"""Ground truth, the LLM judge (against the stub OpenAI-compatible server) and the judge audit.

The evidence judge's own tests (goal values, end-based decisions, the yes/no question) are in
tests/test_judge_evidence.py; here: its request shape, the JSON parser of the vision path, the audit.
"""

from __future__ import annotations

import base64
import math

import pytest

from awm.config import load_settings
from awm.errors import DataError
from awm.evaluation import audit, judge_trajectory, parse_judge_answer, verdict_from_reward
from awm.evaluation.judge import judge_messages
from awm.evaluation.success import ground_truth_success, verdict_passes
from awm.llm.factory import make_client
from awm.trajectory import Step, Task, Trajectory, Verdict
from tests.stub_llm_server import Reply, StubLLMServer


def make_trajectory(
    episode_id: str = "ep1", *, reward: float | None = None, judge: str | None = None, observation: str = ""
) -> Trajectory:
    task = Task(
        task_id="miniwob.login-user",
        goal="Log in as alice with password 123.",
        scope="miniwob/login-user",
        benchmark="miniwob",
    )
    steps = [
        Step(index=0, action_str="fill('5', 'alice')", observation="[5] textbox 'Username'"),
        Step(index=1, action_str="", outcome="parse_error", error="two actions in one answer"),
        Step(index=2, action_str="fill('6', '123')", observation="[6] textbox 'Password'"),
        Step(index=3, action_str="click('9')", observation=observation or "[9] button 'Login'"),
    ]
    return Trajectory(
        trajectory_id=episode_id,
        task=task,
        steps=steps,
        end="answered",  # an answer goes to the model (`pre_decide`)
        final_answer="Logged in.",
        verdict=Verdict(reward=reward, judge=judge),  # type: ignore[arg-type]
    )


def stub_client(stub: StubLLMServer):
    settings = load_settings(
        overrides={
            "llm": {
                "backend": "openai",
                "base_url": stub.base_url,
                "api_key": "x",
                "model": "stub",
                "cache": False,
            }
        }
    )
    return make_client(settings)


# --- ground truth -------------------------------------------------------------------------------


def test_success_needs_the_full_raw_reward_where_the_benchmark_reports_one() -> None:
    # BrowserGym's MiniWoB reward is RAW_REWARD_GLOBAL > 0: partial credit would count as solved.
    partial = Verdict(reward=1.0, raw_reward=0.5)
    assert not verdict_passes(partial, "gt")
    assert verdict_passes(Verdict(reward=1.0, raw_reward=1.0), "gt")
    assert not verdict_passes(Verdict(reward=0.5), "gt") and verdict_passes(Verdict(reward=1.0), "gt")
    assert ground_truth_success(Verdict(judge="success")) is None


def test_verdict_from_reward() -> None:
    assert verdict_from_reward(None) == Verdict()
    assert verdict_from_reward(1).reward == 1.0 and verdict_passes(verdict_from_reward(1), "gt")
    assert not verdict_passes(verdict_from_reward(0.0), "gt")
    with pytest.raises(DataError, match="finite"):
        verdict_from_reward(math.nan)


# --- parsing (pure) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "label", "reason"),
    [
        (
            '{"success": true, "reason": "The welcome page is shown."}',
            "success",
            "The welcome page is shown.",
        ),
        ('  {"success": false, "reason": "still on the form"}\n', "failure", "still on the form"),
        ('```json\n{"success": false, "reason": "wrong user"}\n```', "failure", "wrong user"),
        ('```\n{"success": true, "reason": "ok"}\n```', "success", "ok"),
    ],
)
def test_parse_judge_answer_accepts_strict_json(raw: str, label: str, reason: str) -> None:
    verdict = parse_judge_answer(raw)
    assert (verdict.judge, verdict.judge_reason) == (label, reason)


@pytest.mark.parametrize(
    "raw",
    [
        "Yes, the agent succeeded.",
        'The answer is {"success": true, "reason": "x"}',  # text around the object
        '{"success": "true", "reason": "x"}',  # a string, not a boolean
        '{"success": 1, "reason": "x"}',
        '{"reason": "no success key"}',
        '[{"success": true}]',
        '{"success": true, "reason": 5}',
        "",
    ],
)
def test_parse_judge_answer_rejects_anything_else_as_unknown(raw: str) -> None:
    verdict = parse_judge_answer(raw)
    assert verdict.judge == "unknown"
    assert not verdict_passes(verdict, "judge") and not verdict_passes(verdict, "any")
    assert "unparseable judge answer" in verdict.judge_reason


# --- the judge against the stub server ----------------------------------------------------------


def test_judge_success_with_reason_and_request_shape() -> None:
    traj = make_trajectory(reward=1.0, observation="[3] heading 'Welcome, alice'")
    with StubLLMServer([Reply(text="yes")]) as stub:
        verdict = judge_trajectory(stub_client(stub), traj)
        (request,) = stub.requests
    assert (verdict.judge, verdict.reward) == ("success", 1.0)
    assert "model answered 'yes'" in verdict.judge_reason and "goal value '123'" in verdict.judge_reason
    body = request.body
    assert body["temperature"] == 0.0 and body["max_tokens"] <= 5 and "response_format" not in body
    prompt = body["messages"][-1]["content"]
    assert "Log in as alice with password 123." in prompt
    assert "Logged in." in prompt
    assert "step 2: fill('6', '123') -> ok" in prompt
    assert "step 1: (no action) -> parse_error" in prompt
    assert "goal value '123': typed by fill at step 2" in prompt


def test_judge_no_failure_and_garbage_unknown() -> None:
    with StubLLMServer([Reply(text="no"), Reply(text="I think it probably worked!")]) as stub:
        client = stub_client(stub)
        refused = judge_trajectory(client, make_trajectory(reward=0.0))
        garbage = judge_trajectory(client, make_trajectory(reward=0.0))
    assert refused.judge == "failure" and "model answered 'no'" in refused.judge_reason
    assert garbage.judge == "unknown" and "I think it probably worked!" in garbage.judge_reason
    assert not verdict_passes(garbage, "judge") and not verdict_passes(garbage, "any")


def test_judge_truncates_the_final_page() -> None:
    page = "HEAD-OF-PAGE " + "x" * 20_000 + " TAIL-OF-PAGE"
    traj = make_trajectory().model_copy(update={"meta": {"final_observation": page}})
    with StubLLMServer([Reply(text="no")]) as stub:
        judge_trajectory(stub_client(stub), traj, max_observation_chars=1000)
        prompt = stub.requests[0].body["messages"][-1]["content"]
    assert "HEAD-OF-PAGE" in prompt and "TAIL-OF-PAGE" not in prompt
    assert "more characters cut" in prompt
    assert len(prompt) < 2500


def test_judge_vision_sends_the_screenshot_as_a_data_url() -> None:
    png = b"\x89PNG\r\n\x1a\nscreenshot"
    messages = judge_messages(make_trajectory(), screenshot_png=png)
    parts = messages[-1]["content"]
    assert parts[0]["type"] == "text" and "Log in as alice" in parts[0]["text"]
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png
    # Text mode is the default: the screenshot is only sent when vision is asked for (the JSON verdict).
    with StubLLMServer([Reply(text="yes"), Reply(text='{"success": true, "reason": "ok"}')]) as stub:
        client = stub_client(stub)
        text = judge_trajectory(client, make_trajectory(), screenshot_png=png)
        vision = judge_trajectory(client, make_trajectory(), vision=True, screenshot_png=png)
        text_body, vision_body = (r.body for r in stub.requests)
    assert isinstance(text_body["messages"][-1]["content"], str)
    sent = vision_body["messages"][-1]["content"]
    assert sent[1]["image_url"]["url"] == url
    assert vision_body["response_format"]["json_schema"]["schema"]["required"] == ["success", "reason"]
    assert (text.judge, vision.judge, vision.judge_reason) == ("success", "success", "ok")


def test_audit_counts_by_hand() -> None:
    rows = [
        ("t1", 1.0, "success"),  # TP
        ("t2", 0.5, "success"),  # FP: partial credit is not a full reward
        ("t3", 0.0, "success"),  # FP
        ("t4", 1.0, "failure"),  # FN
        ("t5", 0.0, "failure"),  # TN
        ("t6", 0.0, "failure"),  # TN
        ("t7", 1.0, "unknown"),  # unknown, ground truth success
        ("t8", 0.0, None),  # no judge label: not compared
        ("t9", None, "success"),  # no reward: not compared
    ]
    result = audit(make_trajectory(i, reward=r, judge=j) for i, r, j in rows)
    assert (result.tp, result.fp, result.fn, result.tn, result.unknown) == (1, 2, 1, 2, 1)
    assert (result.total, result.compared, result.missing, result.unknown_gt_success) == (9, 7, 2, 1)
    assert result.precision == pytest.approx(1 / 3)
    assert result.recall == pytest.approx(1 / 3)  # t7, unknown, was not recognised
    assert result.accuracy == pytest.approx(3 / 6)
    assert result.coverage == pytest.approx(6 / 7)
    assert (
        result.false_positive_ids == ["t2", "t3"]
        and result.false_negative_ids == ["t4"]
        and result.unknown_ids == ["t7"]
    )
    md = result.to_markdown()
    assert "| judge success | 1 (TP) | 2 (FP) |" in md
    assert "| judge unknown | 1 | 0 |" in md
    assert "33.3%" in md and "85.7%" in md
    assert "False positives (2): `t2`, `t3`" in md
    assert result.model_dump()["precision"] == pytest.approx(1 / 3)


def test_audit_with_nothing_to_compare() -> None:
    result = audit([make_trajectory(reward=1.0)])
    assert result.compared == 0 and result.precision is None and result.accuracy is None
    assert "n/a" in result.to_markdown()


@pytest.mark.llm
def test_judge_on_the_local_model_gives_a_parseable_verdict(local_llm) -> None:
    """The yes/no grammar must make even the 1.5B model give a decided verdict (the question is asked:
    the password the goal names was typed, so no rule decides without the model)."""
    traj = make_trajectory(reward=1.0, observation="[3] heading 'Welcome, alice! You are logged in.'")
    verdict = judge_trajectory(local_llm, traj, ask_model=True)  # by default the embedded model is not asked
    assert verdict.judge in ("success", "failure"), verdict.judge_reason
    assert verdict.judge_reason
