"""LLM judge: did the agent complete the task? Evidence first, then one narrow yes/no question.

Why this shape: asked for a JSON story verdict over goal, actions and final page, the embedded 1.5B
model called every one of 36 MiniWoB++ episodes a failure (recall 0). So the judge now decides what the
trajectory settles alone (`awm.evaluation.evidence.pre_decide`: failure for an episode the loop
detector, a budget or an error ended; no executed action; a goal value that no action used and no page
showed, or that the page offered as a control no action used; fewer executed actions than the goal's
verbs; success when executed actions used every value the goal names), and asks the model only about
the rest (goals that name no values, or whose values only a page showed): goal, the last few actions
with their targets and what the page said, and the checked goal values, as one yes/no question. On the local backend the answer is decoded under
a GBNF grammar (`root ::= "yes" | "no"`); elsewhere the reply's leading yes/no is read. Anything else is
`unknown`, and `unknown` is never success. Success needs the model's yes AND no missing goal value
(precision first: a judge that calls failures successes fills memory with wrong workflows).

`vision=True` keeps the older path (a strict JSON verdict over the story with the final screenshot,
`parse_judge_answer`) behind the same no-model decisions. The judge never sees the ground-truth reward
(nor the benchmark's info in `meta["env_info"]`). Message construction and answer parsing are pure
functions; `judge_trajectory` is the thin call.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from awm.evaluation.evidence import (
    PreDecision,
    action_name,
    action_values,
    describe_target,
    final_page,
    pre_decide,
)
from awm.llm.base import ChatRequest, LLMClient
from awm.trajectory import Step, Trajectory, Verdict

# ~3.2 characters per token on web pages: 6,000 characters is a ~1,900-token final page.
DEFAULT_MAX_OBSERVATION_CHARS = 6000
MAX_ACTIONS_CHARS = 4000
JUDGE_MAX_TOKENS = 300
RAW_IN_REASON_CHARS = 500

# Both cases: the chat model's own first word is "Yes"/"No"; held to lower case only, it answered "no".
YES_NO_GRAMMAR = 'root ::= "Yes" | "No" | "yes" | "no"'
QUESTION_MAX_TOKENS = 3  # "yes" or "no" under the grammar; a hosted model's "Yes." fits too
LAST_ACTIONS = 5  # the tail of the episode is where the goal is met or not
FEEDBACK_CHARS = 160
ANSWER_CHARS = 300
QUESTION_PAGE_CHARS = 800  # the page after the last action, when stored: its head (title, messages)

QUESTION_SYSTEM = (
    "You check a web agent's work from evidence. Answer with one word: yes or no. "
    "Say yes only if the evidence shows the goal was fully achieved."
)

_END_SENTENCES = {
    "done": "The page closed the task right after the last action.",
    "answered": "The agent finished with the message: {answer}",
    "infeasible": "The agent stopped, reporting that the goal cannot be done: {answer}",
}
_QUESTIONS = {
    "infeasible": "Question: does the evidence show that the goal truly cannot be done here? Answer yes or no.",
    "default": "Question: does the evidence show that the agent did every part of the goal? Answer yes or no.",
}
_LEADING_YES_NO = re.compile(r"\A[\s\"'`*_(\[]*(yes|no)\b", re.IGNORECASE)

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


# --- the vision path: a strict JSON verdict over the story, with the final screenshot ------------


def render_action(step: Step) -> str:
    """`3. click('12') -> ok` or `4. (no action) -> parse_error: ...` for the judge's action list."""
    action = step.action_str or "(no action)"
    outcome = step.outcome if not step.error else f"{step.outcome}: {' '.join(step.error.split())[:160]}"
    return f"{step.index}. {action} -> {outcome}"


def final_page_text(trajectory: Trajectory) -> str:
    """The page after the last action when the harness stored it (`meta["final_observation"]`),
    else the last observation the agent saw."""
    return final_page(trajectory).text


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


# --- the text path: one yes/no question over the evidence ---------------------------------------


def render_evidence_action(step: Step) -> str:
    """`step 2: select_option('Blue') on listbox 'colors' -> ok; page: ...` (no element ids: they
    mean nothing to the judge; the values and the target's role and label do)."""
    if step.action is not None:
        values = ", ".join(repr(" ".join(v.split())[:80]) for v in action_values(step))
        action = f"{action_name(step)}({values})"
    else:  # recorded without a parsed action: the executed string as it was
        action = step.action_str or "(no action)"
    target = describe_target(step)
    text = f"step {step.index}: {action}" + (f" on {target}" if target else "")
    text += f" -> {step.outcome}"
    said = " ".join(" ".join(x for x in (step.reaction, step.feedback) if x).split())
    if said:
        said = said if said.lower().startswith("page:") else f"page: {said}"
        text += f"; {said[:FEEDBACK_CHARS]}"
    return text


def question_prompt(
    trajectory: Trajectory, decision: PreDecision, *, max_page_chars: int = QUESTION_PAGE_CHARS
) -> str:
    """The one question's user message: goal, the last actions, how it ended, the checked goal values,
    and the page after the last action when the harness stored it. A few hundred tokens at most."""
    steps = trajectory.steps[-LAST_ACTIONS:]
    skipped = len(trajectory.steps) - len(steps)
    actions = ([f"({skipped} earlier steps not shown)"] if skipped else []) + [
        render_evidence_action(s) for s in steps
    ]
    answer = (
        repr(" ".join(trajectory.final_answer.split())[:ANSWER_CHARS])
        if trajectory.final_answer
        else "(none)"
    )
    ending = _END_SENTENCES.get(trajectory.end, f"The episode ended: {trajectory.end}.").format(answer=answer)
    if trajectory.final_answer and "{answer}" not in _END_SENTENCES.get(trajectory.end, ""):
        ending += f" The agent's final message: {answer}"
    facts = decision.facts or ["the goal names no literal values to check"]
    parts = [
        f"Goal: {trajectory.task.goal or '(none given)'}",
        "Last actions:\n" + "\n".join(actions),
        ending,
        "Checks:\n" + "\n".join(f"- {f}" for f in facts),
    ]
    page = final_page(trajectory)
    if page.after_last_action and page.text:
        parts.append(f"Final page (start):\n{truncate(page.text, min(max_page_chars, QUESTION_PAGE_CHARS))}")
    parts.append(_QUESTIONS.get(trajectory.end, _QUESTIONS["default"]))
    return "\n\n".join(parts)


def question_request(
    trajectory: Trajectory, decision: PreDecision, *, local: bool, max_page_chars: int
) -> ChatRequest:
    """The yes/no request; the GBNF grammar only for the local (llama.cpp) backend, which honours it."""
    messages = [
        {"role": "system", "content": QUESTION_SYSTEM},
        {"role": "user", "content": question_prompt(trajectory, decision, max_page_chars=max_page_chars)},
    ]
    return ChatRequest(
        messages=messages,
        temperature=0.0,
        max_tokens=QUESTION_MAX_TOKENS,
        purpose="judge",
        grammar=YES_NO_GRAMMAR if local else None,
    )


def parse_yes_no(raw: str) -> str | None:
    """`yes` or `no` when the reply starts with that word (quotes, markdown and case tolerated), else None.

    "Yes." and "no, the form is empty" count; "Not sure", "Maybe yes" and "" do not.
    """
    match = _LEADING_YES_NO.match(raw or "")
    return match.group(1).lower() if match else None


def combine(decision: PreDecision, answer: str | None, raw: str) -> Verdict:
    """Success only on the model's yes with no goal value missing (the pre-decision made sure of that)."""
    facts = "; ".join(decision.facts) or "no goal values to check"
    if answer is None:
        return _unknown(raw, "not yes or no")
    label = "success" if answer == "yes" and decision.label == "ask_model" else "failure"
    return Verdict(judge=label, judge_reason=f"model answered '{answer}' over the evidence: {facts}")


def pre_verdict(decision: PreDecision) -> Verdict:
    """The verdict of a no-model decision (failure or success), with the rule's reason and the checked facts."""
    assert decision.label != "ask_model", "the model decides this one"
    facts = "; ".join(decision.facts)
    reason = f"no model asked: {decision.reason}" + (f" [{facts}]" if facts else "")
    return Verdict(judge=decision.label, judge_reason=reason)


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
    """The vision path's request: the strict JSON verdict, constrained by its schema where supported."""
    return ChatRequest(
        messages=messages,
        temperature=0.0,
        max_tokens=JUDGE_MAX_TOKENS,
        purpose="judge",
        json_schema=JUDGE_SCHEMA,
    )


def judge_trajectory(
    client: LLMClient,
    trajectory: Trajectory,
    *,
    vision: bool = False,
    screenshot_png: bytes | None = None,
    max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
    ask_model: bool | None = None,
) -> Verdict:
    """Judge one trajectory. The returned verdict keeps the trajectory's ground-truth reward, so
    `trajectory.verdict = judge_trajectory(...)` loses nothing (the judge itself never reads it).

    No model call when the trajectory settles it (`pre_decide`: a failure, or every goal value used);
    else one yes/no question, or with `vision=True` the JSON verdict with `screenshot_png` (a
    vision-capable model behind an OpenAI-compatible endpoint). `LLMError` propagates: a judge that
    could not be asked is not a verdict.

    `ask_model=None` asks unless the client is the embedded local model: measured on the development
    split, its yes/no over what the evidence leaves open was a coin toss (P(yes) 0.19-0.33 on true
    successes, 0.27-0.65 on true failures; greedy, it said yes to 4 failures and no success), so with it
    those episodes are `unknown` (never success) instead. `True` asks any model (a hosted one, or to
    measure the embedded one again); `False` never asks.
    """
    keep = {"reward": trajectory.verdict.reward, "raw_reward": trajectory.verdict.raw_reward}
    decision = pre_decide(trajectory)
    if decision.label != "ask_model":
        return pre_verdict(decision).model_copy(update=keep)
    if not (ask_model if ask_model is not None else client.backend != "local"):
        facts = "; ".join(decision.facts) or "no goal values to check"
        reason = f"no model asked: the evidence does not settle it and the judge's model is not asked [{facts}]"
        return Verdict(judge="unknown", judge_reason=reason).model_copy(update=keep)
    if vision:
        messages = judge_messages(
            trajectory, screenshot_png=screenshot_png, max_observation_chars=max_observation_chars
        )
        verdict = parse_judge_answer(client.chat(_request(messages)).text)
        return verdict.model_copy(update=keep)
    request = question_request(
        trajectory, decision, local=client.backend == "local", max_page_chars=max_observation_chars
    )
    raw = client.chat(request).text
    return combine(decision, parse_yes_no(raw), raw).model_copy(update=keep)
