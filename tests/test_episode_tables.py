"""The benchmarks' episode tables: which guidance filters acted, counted from the steps' records."""

from __future__ import annotations

from awm.pipeline.episode_tables import (
    anatomy,
    anatomy_lines,
    first_repetition,
    guidance_acted,
    repetitions,
    step_cost_line,
    step_costs,
)
from awm.trajectory import Step, Task, Trajectory, Verdict


def episode(tid: str, reward: float, *acted: list[str]) -> Trajectory:
    task = Task(task_id="browsergym/sites.forum.reply-topic", goal="Reply", scope="sites/forum/reply-topic", benchmark="sites")
    steps = [Step(index=i, guidance=names) for i, names in enumerate(acted)]
    return Trajectory(trajectory_id=tid, task=task, steps=steps, end="answered", verdict=Verdict(reward=reward))


def test_guidance_acted_counts_steps_episodes_and_solved_episodes_per_filter() -> None:
    runs = [
        episode("a", 1.0, ["goal_note", "spent_choices"], ["goal_note"]),
        episode("b", 0.0, ["goal_note"], []),
        episode("c", 0.0, []),
    ]
    assert guidance_acted(runs) == {
        "goal_note": "3 steps in 2 episodes (1 solved)",
        "spent_choices": "1 steps in 1 episodes (1 solved)",
    }
    lines = anatomy_lines(anatomy(runs, lambda t: t.task.scope))
    at = lines.index("### Guidance filters that acted (all episodes)")
    assert lines[at + 2] == "- goal_note: 3 steps in 2 episodes (1 solved)"
    # A report written before the record existed still renders.
    old = {k: v for k, v in anatomy(runs, lambda t: t.task.scope).items() if k != "guidance_acted"}
    assert "- none" in anatomy_lines(old)[anatomy_lines(old).index("### Guidance filters that acted (all episodes)") + 2]


def test_step_costs_read_model_steps_only_with_median_p95_and_the_cache_share() -> None:
    def step(i: int, tokens: int, cached: int, llm_ms: float, calls: int = 1) -> Step:
        return Step(index=i, prompt_tokens=tokens, cached_prompt_tokens=cached, llm_calls=calls, timings_ms={"llm": llm_ms})

    called = [step(i, 500 + 100 * i, 400, 1000.0 * (i + 1)) for i in range(20)]
    sub_step = step(20, 0, 0, 0.0, calls=0)  # a workflow's sub-step: no model call, not a model step
    run = episode("a", 1.0)
    run.steps = [*called, sub_step]
    costs = step_costs([run])
    assert costs["model_steps"] == 20
    assert (costs["model_s_per_step_median"], costs["model_s_per_step_p95"]) == (10.5, 19.0)
    assert (costs["prompt_tokens_per_step_median"], costs["prompt_tokens_per_step_p95"]) == (1450.0, 2300.0)
    assert costs["prompt_tokens_reused"] == 8000
    assert costs["reused_fraction"] == 8000 / sum(500 + 100 * i for i in range(20))
    assert "10.5 s median, 19.0 s p95" in step_cost_line(costs) and "% of prompt tokens reused" in step_cost_line(costs)
    assert step_costs([])["reused_fraction"] == 0.0


def test_a_repetition_is_the_same_value_into_the_same_field_or_the_same_click_on_the_same_page() -> None:
    from awm.trajectory import TargetDesc

    box, search = TargetDesc(role="searchbox", label="Search"), TargetDesc(role="button", label="Search")

    def act(i: int, name: str, target: TargetDesc, url: str, **args: str) -> Step:
        return Step(index=i, action={"name": name, "args": {"bid": "1", **args}}, target=target, url=url, prompt_tokens=100)

    typed_twice = episode("loop", 0.0)
    typed_twice.steps = [
        act(0, "fill", box, "http://s/", value="Daily agenda"), act(1, "click", search, "http://s/"),
        act(2, "fill", box, "http://s/search?q=Daily", value="Daily agenda"),  # the same search, from the results
        act(3, "click", search, "http://s/search?q=Daily"),
    ]  # fmt: skip
    paged = episode("pages", 1.0)  # "Next" on page 1, then on page 2: two URLs, no repetition
    paged.steps = [act(0, "click", TargetDesc(role="link", label="Next"), f"http://s/list?page={p}") for p in (1, 2)]
    assert first_repetition(typed_twice) == 2 and first_repetition(paged) is None
    assert repetitions([typed_twice, paged]) == {
        "episodes": 1, "solved": 0, "model_steps_after": 2, "prompt_tokens_after": 200,
    }  # fmt: skip
    lines = anatomy_lines(anatomy([typed_twice, paged], lambda t: t.task.scope))
    assert any(line.startswith("Repeated themselves (an act that had worked, done again): 1 episodes, 0 of") for line in lines)
