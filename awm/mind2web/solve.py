"""Solve one Mind2Web task offline, step by step, with teacher forcing: one model call per step.

Why teacher forcing: Mind2Web is a static dataset, so (as in MindAct and AWM) every step is asked on the
gold page with the GOLD previous actions, whatever the model answered before. Each step is recorded as a
`Step` (raw model text, parsed action, the predicted element's role/label, outcome ``ok``,
``parse_error`` or ``context_overflow``), so a run folder is scored, inspected and induced from like any
other trajectory. A step whose prompt cannot fit is recorded and scored wrong, never skipped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from awm.actions import action_grammar, parse_action, render_action
from awm.errors import ActionParseError, PromptTooLargeError
from awm.llm.base import ChatRequest, LLMClient
from awm.memory.view import MemoryView
from awm.mind2web.data import step_key
from awm.mind2web.prompt import PageFormat, build_step_prompt
from awm.mind2web.prune import describe_attributes, element_text, parse_dom
from awm.mind2web.ranking import Ranker, candidates_of, hit_at_k
from awm.mind2web.schema import Candidate, TaskRecord
from awm.tokens import TokenCounter
from awm.trajectory import Step, TargetDesc, Task, Trajectory

# Element tag -> the role a person (and AWM's action_reprs) would call it.
TAG_ROLES = {
    "a": "link",
    "button": "button",
    "select": "combobox",
    "option": "option",
    "textarea": "textbox",
    "img": "img",
    "svg": "img",
    "li": "listitem",
    "label": "label",
    "span": "span",
    "div": "div",
    "td": "cell",
    "th": "columnheader",
    "h1": "heading",
    "h2": "heading",
    "h3": "heading",
}
INPUT_ROLES = {
    "checkbox": "checkbox",
    "radio": "radio",
    "submit": "button",
    "button": "button",
    "search": "searchbox",
}
LABEL_ATTRIBUTES = (
    "aria_label",
    "aria-label",
    "label",
    "title",
    "alt",
    "placeholder",
    "value",
    "input_value",
    "name",
)


def scope_of(record: TaskRecord) -> str:
    return f"mind2web/{record.website}"


def role_of(candidate: Candidate) -> str:
    tag = candidate.tag.lower()
    role = candidate.attributes.get("role") or candidate.attributes.get("aria_role")
    if role:
        return role
    if tag == "input":
        return INPUT_ROLES.get(candidate.attributes.get("type", "text").lower(), "textbox")
    return TAG_ROLES.get(tag, tag)


def target_of(candidate: Candidate, page_text: str = "") -> TargetDesc:
    """Role from the tag, label from aria-label-like attributes, else the element's text."""
    label = next(
        (
            candidate.attributes[a].strip()
            for a in LABEL_ATTRIBUTES
            if candidate.attributes.get(a, "").strip()
        ),
        "",
    )
    label = label or " ".join(page_text.split()) or describe_attributes(candidate.attributes)
    return TargetDesc(role=role_of(candidate), label=label[:80])


def trajectory_id(record: TaskRecord) -> str:
    return f"mind2web-{record.annotation_id}"


def solve_task(
    record: TaskRecord,
    *,
    client: LLMClient,
    ranker: Ranker,
    counter: TokenCounter,
    context_window: int,
    max_tokens: int = 64,
    top_k: int = 10,
    memory: MemoryView | None = None,
    exemplars: Sequence[str] = (),
    temperature: float = 0.0,
    seed: int | None = None,
    use_grammar: bool | None = None,
    page_format: PageFormat = "compact",
) -> Trajectory:
    """Ask the model for every step of `record` (gold previous actions) and record each answer.

    `use_grammar` (default: on for the local backend, whose llama.cpp server reads GBNF) constrains the
    answer to one action on an id shown on the page; hosted APIs answer freely and are parsed alike.
    `page_format` picks how the page is shown (see `awm.mind2web.prompt`); ids are backend_node_ids in
    both, so the grammar, the parse and the scoring are the same.
    """
    if use_grammar is None:
        use_grammar = getattr(client, "backend", "") == "local"
    started = time.monotonic()
    workflows = list(memory.workflows) if memory else []
    steps: list[Step] = []
    hits: list[bool] = []
    for i, action in enumerate(record.actions):
        t0 = time.monotonic()
        previous = record.action_reprs[:i]
        dom = parse_dom(action.cleaned_html)
        ranking = ranker.rank(record, action, previous, dom=dom)
        hits.append(hit_at_k(action, ranking, top_k))
        keep = [cid for cid, _ in ranking[:top_k]]
        t_rank = time.monotonic()
        step = Step(index=i)
        try:
            prompt = build_step_prompt(
                record,
                action,
                keep,
                counter=counter,
                context_window=context_window,
                completion_tokens=max_tokens,
                workflows=workflows,
                exemplars=exemplars,
                previous_actions=previous,
                dom=dom,
                page_format=page_format,
            )
        except PromptTooLargeError as exc:
            step.outcome, step.error = "context_overflow", str(exc)
            step.timings_ms = {"rank": (t_rank - t0) * 1000}
            steps.append(step)
            continue
        step.observation = prompt.fitted.messages[-1]["content"]
        step.feedback = "; ".join(prompt.fitted.dropped)
        grammar = action_grammar("mind2web", keep, with_thought=False) if use_grammar and keep else None
        request = ChatRequest(
            messages=prompt.fitted.messages,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            grammar=grammar,
        )
        result = client.chat(request)
        step.model_output = result.text
        step.prompt_tokens, step.completion_tokens, step.llm_calls = (
            result.usage.prompt_tokens or prompt.fitted.prompt_tokens,
            result.usage.completion_tokens,
            0 if result.cached else 1,  # a cached answer cost no model call
        )
        step.timings_ms = {"rank": (t_rank - t0) * 1000, "llm": result.seconds * 1000}
        try:
            parsed = parse_action(result.text, action_set="mind2web")
        except ActionParseError as exc:
            step.outcome, step.error = "parse_error", f"{exc.kind}: {exc}"
            steps.append(step)
            continue
        step.thought = parsed.thought
        step.action = parsed.action.model_dump()
        try:
            step.action_str = render_action(parsed.action, "mind2web")
        except ActionParseError:
            step.action_str = result.text.strip()
        chosen = {c.backend_node_id: c for c in candidates_of(action)}.get(parsed.action.target_id or "")
        if chosen is not None:
            step.target = target_of(chosen, element_text(dom, chosen.backend_node_id))
        steps.append(step)
    return Trajectory(
        trajectory_id=trajectory_id(record),
        task=Task(
            task_id=record.annotation_id,
            goal=record.confirmed_task,
            scope=scope_of(record),
            benchmark="mind2web",
            meta={
                "website": record.website,
                "domain": record.domain,
                "subdomain": record.subdomain,
                "split": record.split,
            },
        ),
        steps=steps,
        end="done",
        model=getattr(client, "model", ""),
        memory_scope=memory.scope if memory else None,
        memory_version=memory.version if memory else None,
        workflows_used=[w.name for w in workflows],
        seconds=time.monotonic() - started,
        meta={
            "action_uids": [a.action_uid for a in record.actions],
            "ranker": ranker.name,
            "top_k": top_k,
            "page_format": page_format,
            "target_in_top_k": hits,
            "exemplars": len(exemplars),
        },
    )


def predictions_for(trajectory: Trajectory) -> dict[str, str]:
    """Raw answer text per `step_key`, for `metrics.score` (an overflowed step maps to "": scored wrong)."""
    annotation_id = trajectory.task.task_id
    uids = trajectory.meta.get("action_uids", [])
    return {
        step_key(annotation_id, uid): step.model_output
        for uid, step in zip(uids, trajectory.steps, strict=True)
    }
