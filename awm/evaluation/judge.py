"""LLM judge: did the agent complete the task? A strict JSON verdict, never a guess.

Why so strict: a judge that calls failed trajectories successful fills memory with wrong
workflows (the original AWM's worst failure mode). The answer must be exactly
`{"success": true|false, "reason": "..."}` (a code fence around it is tolerated); anything else
is `unknown`, and `unknown` is never success.

Message construction and answer parsing are pure functions; `judge_trajectory` is the thin call.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from awm.llm.base import ChatRequest, LLMClient
from awm.trajectory import Step, Trajectory, Verdict

# ~3.2 characters per token on web pages: 6,000 characters is a ~1,900-token final page.
DEFAULT_MAX_OBSERVATION_CHARS = 6000
MAX_ACTIONS_CHARS = 4000
JUDGE_MAX_TOKENS = 300
RAW_IN_REASON_CHARS = 500

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["success", "reason"],
    "additionalProperties": False,
}

SYSTEM_PROMPT = (
    "You evaluate whether a web agent completed a task. You see the task goal, the agent's final answer, "
    "the actions it took with their outcomes, and the final page. Judge only from this evidence: "
    "if the evidence does not show the goal was achieved, it was not. "
    'Reply with JSON only, exactly: {"success": true or false, "reason": "one or two sentences"}'
)

_FENCE = re.compile(r"\A```[A-Za-z]*\s*(?P<body>.*?)\s*```\Z", re.DOTALL)


def truncate(text: str, limit: int) -> str:
    """The head of `text` within `limit` characters, saying how much was cut (the top of a page
    holds its title, messages and main content, so the head is the part worth keeping)."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} more characters cut]"
    return text[: max(0, limit - len(marker))] + marker


def render_action(step: Step) -> str:
    """`3. click('12') -> ok` or `4. (no action) -> parse_error: ...` for the judge's action list."""
    action = step.action_str or "(no action)"
    outcome = step.outcome if not step.error else f"{step.outcome}: {' '.join(step.error.split())[:160]}"
    return f"{step.index}. {action} -> {outcome}"


def final_page_text(trajectory: Trajectory) -> str:
    """The page after the last action when the harness stored it (`meta["final_observation"]`),
    else the last observation the agent saw."""
    final = trajectory.meta.get("final_observation")
    if isinstance(final, str) and final:
        return final
    return trajectory.steps[-1].observation if trajectory.steps else ""


def judge_prompt(
    trajectory: Trajectory, *, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS
) -> str:
    """The user message text: goal, final answer, actions with outcomes, final page."""
    actions = "\n".join(render_action(s) for s in trajectory.steps) or "(no steps)"
    page = final_page_text(trajectory) or "(no observation recorded)"
    return (
        f"Goal: {trajectory.task.goal or '(none given)'}\n\n"
        f"Final answer: {trajectory.final_answer or '(none)'}\n"
        f"Episode ended: {trajectory.end}\n\n"
        f"Actions:\n{truncate(actions, MAX_ACTIONS_CHARS)}\n\n"
        f"Final page:\n{truncate(page, max_observation_chars)}\n\n"
        "Did the agent complete the goal? Answer with the JSON object only."
    )


def judge_messages(
    trajectory: Trajectory,
    *,
    screenshot_png: bytes | None = None,
    max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
) -> list[dict[str, Any]]:
    """Chat messages for the judge. With a screenshot, the user message is OpenAI-style parts:
    the text, then the image as a `data:image/png;base64,...` URL."""
    text = judge_prompt(trajectory, max_observation_chars=max_observation_chars)
    if screenshot_png is None:
        user: dict[str, Any] = {"role": "user", "content": text}
    else:
        url = "data:image/png;base64," + base64.b64encode(screenshot_png).decode("ascii")
        user = {
            "role": "user",
            "content": [
                {"type": "text", "text": text + "\nThe final screenshot is attached."},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    return [{"role": "system", "content": SYSTEM_PROMPT}, user]


def _unknown(raw: str, why: str) -> Verdict:
    flat = raw.strip()
    shown = flat if len(flat) <= RAW_IN_REASON_CHARS else flat[:RAW_IN_REASON_CHARS] + "..."
    return Verdict(judge="unknown", judge_reason=f"unparseable judge answer ({why}): {shown!r}")


def parse_judge_answer(raw: str) -> Verdict:
    """Parse `{"success": bool, "reason": str}`, optionally inside one code fence; else `unknown`.

    `success` must be a JSON boolean (not "yes", not 1); no text may surround the object.
    """
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return _unknown(raw, "not JSON")
    if not isinstance(data, dict):
        return _unknown(raw, "not a JSON object")
    success = data.get("success")
    if not isinstance(success, bool):
        return _unknown(raw, '"success" is not true or false')
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        return _unknown(raw, '"reason" is not a string')
    return Verdict(judge="success" if success else "failure", judge_reason=reason.strip())


def _request(messages: list[dict[str, Any]]) -> ChatRequest:
    fields: dict[str, Any] = {
        "temperature": 0.0,
        "max_tokens": JUDGE_MAX_TOKENS,
        "purpose": "judge",
        "json_schema": JUDGE_SCHEMA,
    }
    if all(isinstance(m.get("content"), str) for m in messages):
        return ChatRequest(messages=messages, **fields)
    # Workaround: ChatRequest.messages is typed list[dict[str, str]], which rejects image parts.
    # Until the shared model widens it to list[dict[str, Any]], build the vision request unvalidated.
    return ChatRequest.model_construct(
        **(ChatRequest(messages=[]).model_dump() | fields | {"messages": messages})
    )


def judge_trajectory(
    client: LLMClient,
    trajectory: Trajectory,
    *,
    vision: bool = False,
    screenshot_png: bytes | None = None,
    max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
) -> Verdict:
    """Ask the judge about one trajectory. The returned verdict keeps the trajectory's ground-truth
    reward, so `trajectory.verdict = judge_trajectory(...)` loses nothing.

    `vision=True` sends `screenshot_png` (the final screenshot) with the text; it needs a
    vision-capable model behind an OpenAI-compatible endpoint. `LLMError` propagates: a judge that
    could not be asked is not a verdict.
    """
    shot = screenshot_png if vision else None
    messages = judge_messages(trajectory, screenshot_png=shot, max_observation_chars=max_observation_chars)
    result = client.chat(_request(messages))
    verdict = parse_judge_answer(result.text)
    return verdict.model_copy(update={"reward": trajectory.verdict.reward})
