"""The episode harness on real Chromium: MiniWoB tasks, local fixture pages, a killed browser.

Fixture pages are served from tests/fixtures/pages on 127.0.0.1 and opened as BrowserGym's open-ended
task. Policies answer with action text, so every episode goes through the model's parse path.
"""

from __future__ import annotations

import io
import os
import re
import signal

import numpy as np
import pytest
from PIL import Image

from awm.config import BrowserSettings
from awm.errors import PromptTooLargeError
from awm.trajectory import Step, Task, Trajectory
from awm.webarena.env import BrowserSession
from awm.webarena.harness import Decision, DecisionContext, HarnessConfig, StepCapture, run_episode
from awm.webarena.policies import MiniWobScriptedPolicy, ScriptedPolicy

pytestmark = pytest.mark.browser



def fixture_task(base_url: str, page: str) -> Task:
    return Task(
        task_id="browsergym/openended",
        scope=f"fixtures/{page}",
        benchmark="browsergym",
        meta={"task_kwargs": {"start_url": f"{base_url}{page}.html", "goal": f"work on {page}"}},
    )


class LabelScript:
    """Scripted text with `{Label}` placeholders filled with the id of the element so labelled on the page."""

    name = "label-script"

    def __init__(self, templates: list[str]) -> None:
        self.templates = templates
        self.calls = 0
        self.contexts: list[DecisionContext] = []

    def decide(self, ctx: DecisionContext) -> Decision:
        self.contexts.append(ctx)
        template = self.templates[min(self.calls, len(self.templates) - 1)]
        self.calls += 1

        def bid_of(match: re.Match[str]) -> str:
            # the control, not its <label> (LabelText), when both carry the text
            found = sorted(
                (b for b, t in ctx.page.elements.items() if t.label == match.group(1)),
                key=lambda b: ctx.page.elements[b].role == "LabelText",
            )
            assert found, f"no element labelled {match.group(1)!r} in:\n{ctx.page.text}"
            return found[0]

        # Each call reports 7 prompt tokens, 5 of them reused from a server's prefix cache.
        return Decision(text=re.sub(r"\{([^{}]+)\}", bid_of, template), prompt_tokens=7, cached_prompt_tokens=5)


# --- MiniWoB through the same harness path the model uses ----------------------------------------


@pytest.mark.parametrize("task_name", MiniWobScriptedPolicy.TASKS)
def test_scripted_policies_solve_miniwob(session: BrowserSession, task_name: str):
    task = Task(task_id=f"miniwob.{task_name}", scope=f"miniwob/{task_name}", benchmark="miniwob", seed=7)
    steps: list[Step] = []
    trajectory = run_episode(
        session,
        MiniWobScriptedPolicy(),
        task,
        HarnessConfig(max_steps=6),
        on_step=lambda t, s, png: steps.append(s),
    )
    assert trajectory.end == "done", [(s.action_str, s.outcome, s.error) for s in trajectory.steps]
    assert trajectory.verdict.reward == 1.0 and trajectory.verdict.raw_reward == 1.0
    assert trajectory.task.goal and not task.goal  # the page's goal is on the trajectory's copy only
    assert steps == trajectory.steps and all(s.outcome == "ok" for s in steps)
    assert all(s.action_str and s.llm_calls == 1 for s in steps)
    Trajectory.model_validate_json(trajectory.to_json())  # the record round-trips as JSON


# --- fixture pages -------------------------------------------------------------------------------


def test_disabled_target_fails_fast_after_one_parse_retry(session: BrowserSession, base_url: str):
    policy = LabelScript(["I think I should pay.", "Action: click('{Pay now}')", "click('{Help}')"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "disabled"), HarnessConfig(max_steps=2))
    first, second = trajectory.steps
    assert policy.contexts[1].retry_error.startswith("no_action")  # the exact parse error was fed back
    assert first.llm_calls == 2
    assert (first.prompt_tokens, first.cached_prompt_tokens) == (14, 10)  # both calls of the step, reuse too
    assert first.outcome == "not_interactable" and "disabled" in first.error
    assert first.timings_ms["execute"] < 1500
    assert "not_interactable" in first.feedback and policy.contexts[2].feedback == first.feedback
    assert second.outcome == "ok" and "help shown" in second.feedback


def test_an_act_that_already_worked_done_again_ends_the_episode(session: BrowserSession, base_url: str):
    """The same value into the same field again, with another step between (so no page repeats itself):
    another value into the field is no repeat; the same value again ends the episode as stuck (with
    `repeat_stop = 2`, at the second repeat)."""
    script = ["fill('{Username}', 'ann')", "fill('{Password}', 'a1')", "fill('{Username}', 'bob')",
              "fill('{Username}', 'ann')", "fill('{Password}', 'b2')", "fill('{Username}', 'ann')"]  # fmt: skip
    trajectory = run_episode(session, LabelScript(script), fixture_task(base_url, "wf_signin"), HarnessConfig(max_steps=8))
    assert [s.outcome for s in trajectory.steps] == ["ok", "ok", "ok", "no_progress"]
    assert trajectory.end == "stuck" and "the same act already worked 1 time(s)" in trajectory.steps[3].error
    later = run_episode(session, LabelScript(script), fixture_task(base_url, "wf_signin"), HarnessConfig(max_steps=8, repeat_stop=2))
    assert [s.outcome for s in later.steps] == ["ok", "ok", "ok", "ok", "ok", "no_progress"]


def test_overlay_is_dismissed_then_click_lands(session: BrowserSession, base_url: str):
    policy = LabelScript(["click('{Continue}')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "overlay"), HarnessConfig(max_steps=2))
    step = trajectory.steps[0]
    assert step.outcome == "ok", step.error
    assert "dismissed it with 'Accept'" in step.feedback
    assert "continued" in trajectory.steps[1].observation


def test_a_time_or_date_is_written_in_the_field_s_own_format(session: BrowserSession, base_url: str):
    """A goal says 5:36 PM; a time field takes only 17:36 (Playwright's fill refuses the rest)."""
    policy = LabelScript(["fill('{Time}', '5:36 PM')", "fill('{Date}', 'Dec 31, 2016')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "datetime"), HarnessConfig(max_steps=3))
    time_step, date_step, last = trajectory.steps
    assert time_step.outcome == "ok" and date_step.outcome == "ok", (time_step.error, date_step.error)
    assert "wrote '5:36 PM' as '17:36', the format of this time field" in time_step.feedback
    assert "as '2016-12-31'" in date_step.feedback
    assert "time 17:36" in last.observation and "date 2016-12-31" in last.observation


def test_a_click_on_an_option_of_a_multiple_list_adds_it_as_ctrl_click_does(session: BrowserSession, base_url: str):
    """Measured on click-scroll-list: a click that replaced the choice undid the option chosen before."""
    policy = LabelScript(["click('{Ertha}')", "click('{Aurel}')", "click('{Ertha}')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "multiselect"), HarnessConfig(max_steps=4))
    first, second, third, last = trajectory.steps
    assert [s.outcome for s in (first, second, third)] == ["ok"] * 3, [s.error for s in trajectory.steps]
    assert "added 'Aurel' in the list" in second.feedback and "chosen now: Ertha, Aurel" in second.feedback
    assert "chosen ertha+aurel" in third.observation
    assert "took away 'Ertha'" in third.feedback and "chosen aurel" in last.observation


def test_a_slider_is_filled_with_its_value_by_arrow_keys(session: BrowserSession, base_url: str):
    """Measured on use-slider: shown as a bare clickable, the model clicked the slider and submitted."""
    policy = LabelScript(
        ["fill('{Speed}', '10')", "fill('{Speed}', '25')", "fill('{Volume}', '7')", "fill('{Speed}', 'fast')", "noop()"]
    )
    trajectory = run_episode(session, policy, fixture_task(base_url, "slider"), HarnessConfig(max_steps=5))
    first, beyond, native, words, last = trajectory.steps
    assert "slider 'Speed' value='4'" in first.observation and "\n4\n" not in first.observation
    # 6 presses at one unit each (it moved 12), then 3 back at the step seen (2)
    assert first.outcome == "ok" and "moved the slider from 4 to 10 with the arrow keys (9 presses)" in first.feedback
    assert beyond.outcome == "ok" and "shows 20 after" in beyond.feedback and "from 10, not 25" in beyond.feedback
    assert native.outcome == "ok" and "from 3 to 7" in native.feedback, native.error
    assert words.outcome == "action_error" and "is a slider: fill it with a number, not 'fast'" in words.error
    assert "slider 'Speed' value='20'" in last.observation and "slider 'Volume' value='7'" in last.observation


class FigureScript:
    """Acts on the figure whose words on its line are `words` (figures have no label to find them by):
    `action` with ``{bid}`` for each, then the `then` answers on the last one, then noop()."""

    name = "figure-script"

    def __init__(self, words: list[str], action: str = "click('{bid}')", then: list[str] | None = None) -> None:
        self.words = words
        self.action = action
        self.then = then or []
        self.calls = 0
        self.bid = ""

    def decide(self, ctx: DecisionContext) -> Decision:
        self.calls += 1
        if self.calls <= len(self.words):
            wanted = f"({self.words[self.calls - 1]})"
            line = next(line for line in ctx.page.text.splitlines() if line.endswith(wanted))
            self.bid = line.split("]")[0].lstrip("[")
            return Decision(text=self.action.format(bid=self.bid))
        later = self.calls - len(self.words) - 1
        return Decision(text=self.then[later].format(bid=self.bid) if later < len(self.then) else "noop()")


def test_svg_figures_are_shown_in_words_and_take_clicks(session: BrowserSession, base_url: str):
    """Measured on click-shape: SVG shapes had no ids and the model saw only letters run together."""
    policy = FigureScript(["large red circle", "large blue letter"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "figures"), HarnessConfig(max_steps=3))
    first, second, last = trajectory.steps
    assert re.search(r"\[\d+\] clickable \(small red circle\)\n\[\d+\] clickable \(large red circle\)", first.observation)
    assert first.outcome == "ok" and "picked large red circle" in second.observation, first.error
    assert re.search(r"\[\d+\] clickable 'Q' \(large blue letter\)", second.observation)
    assert "picked letter Q" in last.observation


def test_text_the_goal_asks_to_highlight_is_selected_by_a_mouse_drag(session: BrowserSession, base_url: str):
    """highlight-text: the page reads the selection when Submit is clicked; text blocks carry ids only
    when the goal asks to highlight text, and take select_text alone."""
    task = fixture_task(base_url, "highlight")
    task.meta["task_kwargs"]["goal"] = "Highlight the text in the 2nd paragraph and click Submit."
    policy = LabelScript(["select_text('{Cras dignissim nulla in morbi.}')", "click('{Submit}')", "noop()"])
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=3))
    selected, submitted, last = trajectory.steps
    assert re.search(r"\[\w+\] text 'Lorem ipsum dolor sit amet.'\n\[\w+\] text 'Cras dignissim", selected.observation)
    assert selected.outcome == "ok" and "highlighted 'Cras dignissim nulla in morbi.'" in selected.feedback, selected.error
    assert submitted.outcome == "ok" and "submitted: Cras dignissim nulla in morbi." in last.observation
    plain = run_episode(session, LabelScript(["noop()"]), fixture_task(base_url, "highlight"), HarnessConfig(max_steps=1))
    assert "\nLorem ipsum dolor sit amet.\n" in "\n" + plain.steps[0].observation + "\n"


def test_an_element_is_dragged_by_its_own_size_in_the_direction_asked(session: BrowserSession, base_url: str):
    """drag-circle: "Drag the circle left then press Submit"; the drag goes through BrowserGym's mouse."""
    task = fixture_task(base_url, "drag")
    task.meta["task_kwargs"]["goal"] = "Drag the circle left."
    policy = FigureScript(["orange circle"], action="drag('{bid}', 'left')", then=["drag('{bid}', 'sideways')"])
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=3))
    dragged, refused, last = trajectory.steps
    assert dragged.outcome == "ok" and "dragged" in dragged.feedback and "40 pixels left" in dragged.feedback, dragged.error
    assert "ball at 110,100" in refused.observation
    assert refused.outcome == "action_error" and "needs a direction (left, right, up or down) or the id of the element to drop it on, not 'sideways'" in refused.error


def test_an_element_is_dropped_onto_the_element_named_by_its_id(session: BrowserSession, base_url: str):
    """A task board (not a benchmark page): "Drag Write report to Done". A direction cannot say where
    the Done column is; the heading of the column carries an id when the goal asks to drag, and the
    card is dropped on it."""
    task = fixture_task(base_url, "drop")
    task.meta["task_kwargs"]["goal"] = "Drag the card Write report to the Done column."
    trajectory = run_episode(session, LabelScript(["drag('{Write report}', '{Done}')", "noop()"]), task, HarnessConfig(max_steps=2))
    dropped = trajectory.steps[0]
    assert dropped.outcome == "ok" and "onto [" in dropped.feedback, dropped.error
    assert "Write report moved to Done" in trajectory.steps[1].observation


def test_a_read_only_date_field_is_filled_through_its_calendar(session: BrowserSession, base_url: str):
    """choose-date: the field refuses typing; fill opens its calendar, pages it back and clicks the day."""
    policy = LabelScript(["fill('{Date:}', '10/05/2016')", "fill('{Date:}', 'soon')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "datepicker"), HarnessConfig(max_steps=3))
    picked, refused, last = trajectory.steps
    assert picked.outcome == "ok" and "picked 10/05/2016 in the field's calendar (4 clicks)" in picked.feedback, picked.error
    assert "the field shows '10/05/2016'" in picked.feedback and "value='10/05/2016'" in refused.observation
    assert refused.outcome != "ok"  # no date in it: a plain fill, which a read-only field refuses


def test_label_renamed_after_load_and_after_click(session: BrowserSession, base_url: str):
    policy = LabelScript(["click('{Submit order}')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "renamed"), HarnessConfig(max_steps=2))
    first = trajectory.steps[0]
    assert "Save" not in first.observation and first.target and first.target.label == "Submit order"
    assert first.outcome == "ok"
    assert "Order placed" in first.feedback and "thank you" in first.feedback


def test_hostile_aria_label_is_sanitized_and_ids_stay_right(session: BrowserSession, base_url: str):
    page = session.reset(fixture_task(base_url, "quotes"))
    assert len(page.ids) == 1 and "99" not in page.ids
    line = next(ln for ln in page.text.splitlines() if ln.startswith(f"[{page.ids[0]}]"))
    assert line.count("'") == 2 and "[99]" not in page.text and "<|im_start|>" not in page.text
    assert not any(ln.startswith("Action:") for ln in page.text.splitlines())
    trajectory = run_episode(
        session, ScriptedPolicy([f"click('{page.ids[0]}')", "noop()"]), fixture_task(base_url, "quotes"),
        HarnessConfig(max_steps=2),
    )  # fmt: skip
    assert trajectory.steps[0].outcome == "ok" and "greeted" in trajectory.steps[0].feedback


def test_unchanging_page_nudges_then_ends_stuck(session: BrowserSession, base_url: str):
    policy = LabelScript(["click('{Do nothing}')"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "static"), HarnessConfig(max_steps=8))
    assert trajectory.end == "stuck"
    # The first click focuses the button (a change); from then on the page stays the same. (A click
    # again is no repeat for `HarnessConfig.repeat_stop`: it may be a toggle.)
    assert [s.outcome for s in trajectory.steps] == ["ok", "ok", "ok", "no_progress"]
    assert "focus moved" in trajectory.steps[0].feedback
    assert "no detectable change" in trajectory.steps[1].feedback
    assert "You repeated" in trajectory.steps[2].feedback


def test_a_toggle_cycle_ends_stuck_when_it_comes_round_twice(session: BrowserSession, base_url: str):
    """Measured on navigate-tree: a folder toggled open and shut until the loop stop. The page changes
    every step, so only the cycle (same page, same action, the same way round again) can see it."""
    policy = LabelScript(["click('{Documents}')", "click('{Hide}')"] * 5)
    trajectory = run_episode(session, policy, fixture_task(base_url, "toggle"), HarnessConfig(max_steps=10))
    assert trajectory.end == "stuck"
    assert [s.outcome for s in trajectory.steps] == ["ok", "ok", "ok", "ok", "no_progress"]
    assert "went round the same cycle twice" in trajectory.steps[-1].error
    assert "notes.txt" in trajectory.steps[1].observation  # the page did change every step


def test_native_select_uses_select_option(session: BrowserSession, base_url: str):
    policy = LabelScript(["select_option('{Color}', 'Green')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "select"), HarnessConfig(max_steps=2))
    step = trajectory.steps[0]
    assert "options: Red | Green | Blue" in step.observation
    assert step.outcome == "ok", step.error
    assert "is now 'Green'" in step.feedback and "picked g" in step.feedback


def test_click_inside_iframe(session: BrowserSession, base_url: str):
    policy = LabelScript(["click('{Press inside}')", "noop()"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "iframe"), HarnessConfig(max_steps=2))
    step = trajectory.steps[0]
    assert step.action_str.startswith("click('a"), step.action_str  # a bid inside frame "a"
    assert step.outcome == "ok", step.error
    assert "Pressed inside" in step.feedback and "iframe [a]" in step.feedback


def test_fill_on_a_button_is_refused_with_the_fix_then_the_click_lands(
    session: BrowserSession, base_url: str
):
    policy = LabelScript(["fill('{Do nothing}', 'x')", "click('{Do nothing}')"])
    trajectory = run_episode(session, policy, fixture_task(base_url, "static"), HarnessConfig(max_steps=1))
    step = trajectory.steps[0]
    bid = step.action_str.split("'")[1]
    refused = policy.contexts[1].retry_error
    assert (
        refused
        == f"bad_argument: fill() needs a text field or a slider; [{bid}] is a button 'Do nothing': use click('{bid}')"
    )
    assert step.llm_calls == 2 and step.action_str == f"click('{bid}')" and step.outcome == "ok"
    # the same answer goes through as before when the role check is off
    unchecked = LabelScript(["fill('{Do nothing}', 'x')"])
    trajectory = run_episode(
        session, unchecked, fixture_task(base_url, "static"), HarnessConfig(max_steps=1, role_checks=False)
    )
    assert trajectory.steps[0].llm_calls == 1 and trajectory.steps[0].outcome == "action_error"


class OversizedPolicy:
    """Raises what `fit_prompt` raises when even the fixed parts of a request exceed the context window."""

    name = "oversized"

    def decide(self, ctx: DecisionContext) -> Decision:
        raise PromptTooLargeError("the fixed parts need 9,000 tokens; the window leaves 3,840")


def test_the_page_after_the_last_action_is_handed_over_as_the_final_frame(session: BrowserSession, base_url: str):
    captures: list[StepCapture | None] = []
    finals: list[StepCapture] = []
    policy = LabelScript(["click('{Help}')"])
    trajectory = run_episode(
        session, policy, fixture_task(base_url, "disabled"), HarnessConfig(max_steps=1),
        on_step=lambda t, s, capture: captures.append(capture), on_final=lambda t, capture: finals.append(capture),
    )  # fmt: skip
    [step_capture] = captures
    [final] = finals
    assert final.final and not step_capture.final
    assert final.png is not None and final.png.startswith(b"\x89PNG") and final.png != step_capture.png
    shown = ">help shown</p>"  # the paragraph's text (the button's onclick attribute spells it too)
    assert shown in (final.html or "") and shown not in (step_capture.html or "")
    assert "help shown" in trajectory.meta["final_observation"]  # what the judge reads, the same page


def test_oversized_prompt_ends_the_episode_as_context_overflow(session: BrowserSession, base_url: str):
    shots: list[bytes | None] = []
    trajectory = run_episode(
        session, OversizedPolicy(), fixture_task(base_url, "static"), HarnessConfig(max_steps=3),
        on_step=lambda t, s, capture: shots.append(capture.png if capture is not None else None),
    )  # fmt: skip
    (step,) = trajectory.steps
    assert trajectory.end == "budget_exhausted"
    assert step.outcome == "context_overflow" and "9,000 tokens" in step.error
    assert shots and shots[0] is not None and shots[0].startswith(b"\x89PNG")  # encoded for the recorder


def test_screenshot_is_encoded_only_when_asked(session: BrowserSession, base_url: str):
    page = session.reset(fixture_task(base_url, "static"))
    assert page.screenshot is not None and page.screenshot.ndim == 3
    png = page.screenshot_png()
    assert png is not None and png.startswith(b"\x89PNG") and page.screenshot_png() is png  # once
    decoded = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert (decoded == page.screenshot[:, :, :3]).all()  # our fast encoder writes the very pixels
    assert "screenshot" not in page.model_dump()
    with BrowserSession(BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0, screenshots=False)) as off:
        bare = off.reset(fixture_task(base_url, "static"))
        assert bare.screenshot is None and bare.screenshot_png() is None


# --- a browser killed mid-episode ----------------------------------------------------------------


class KillingPolicy:
    """Clicks Help, and SIGKILLs the session's Chromium just before its second answer."""

    name = "killer"

    def __init__(self, session: BrowserSession) -> None:
        self.session = session
        self.killed: set[int] = set()

    def decide(self, ctx: DecisionContext) -> Decision:
        if ctx.step_index == 1:
            self.killed = self.session.pids
            assert self.killed, "no Chromium process found for this session"
            for pid in self.killed:
                os.kill(pid, signal.SIGKILL)
        bid = next(b for b, t in ctx.page.elements.items() if t.label == "Help")
        return Decision(text=f"click('{bid}')")


def test_killed_browser_ends_env_error_and_next_reset_works(base_url: str):
    recorded: list[Step] = []
    with BrowserSession(
        BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0, screenshots=False)
    ) as session:
        policy = KillingPolicy(session)
        trajectory = run_episode(
            session, policy, fixture_task(base_url, "disabled"), HarnessConfig(max_steps=4),
            on_step=lambda t, s, png: recorded.append(s),
        )  # fmt: skip
        assert trajectory.end == "env_error"
        assert [s.outcome for s in trajectory.steps] == ["ok", "env_error"]
        assert recorded == trajectory.steps and trajectory.steps[-1].error
        page = session.reset(fixture_task(base_url, "static"))
        assert "Do nothing" in page.text
        assert session.pids and not (session.pids & policy.killed)


def test_hung_page_is_killed_by_the_watchdog(base_url: str):
    config = BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0, screenshots=False, call_timeout_s=6)
    with BrowserSession(config) as session:
        policy = LabelScript(["click('{Freeze}')"])
        trajectory = run_episode(session, policy, fixture_task(base_url, "hang"), HarnessConfig(max_steps=3))
        assert trajectory.end == "env_error"
        assert trajectory.steps[-1].outcome == "env_error" and "hung" in trajectory.steps[-1].error
        assert "Do nothing" in session.reset(fixture_task(base_url, "static")).text


def test_a_click_whose_page_loads_slowly_is_no_failure(session: BrowserSession, base_url: str):
    """BrowserGym gives a click 500 ms, page load included; a real site's next page often takes longer.
    The click was delivered and a new document came: the step is ok and says so (not a timeout error)."""
    import time as _time

    from awm.actions import Action

    page = session.reset(fixture_task(base_url, "slow_link"))

    def slow(route, request):  # the server answers the report after 1.5 s, as a busy site would
        _time.sleep(1.5)
        route.continue_()

    session.page.context.route("**/static.html?slow=1", slow)
    [link] = [bid for bid, t in page.elements.items() if t.label == "Open the yearly report"]
    result = session.execute(Action(name="click", args={"bid": link}))
    assert result.outcome == "ok", result.error
    assert "over 500 ms" in result.note
    assert session.observe().url.endswith("static.html?slow=1")


def test_a_link_the_browser_cannot_open_goes_back_and_says_so(session: BrowserSession, base_url: str):
    """A dead link (here a closed port; on an arena site, a link off the site) leaves Chromium on its error
    page, where no action helps: the executor goes back and the step says why."""
    from awm.actions import Action

    page = session.reset(fixture_task(base_url, "dead_link"))
    [link] = [bid for bid, t in page.elements.items() if t.label == "Old mirror"]
    result = session.execute(Action(name="click", args={"bid": link}))
    assert result.outcome == "action_error" and "could not be opened" in result.error
    assert session.observe().url.endswith("dead_link.html")


class _TimeLimited:
    """What gymnasium's `TimeLimit` does to an environment (`truncated` after `limit` steps), around the
    real BrowserGym environment; everything else is the environment's own."""

    def __init__(self, env: object, limit: int) -> None:
        self.env, self.limit, self.steps = env, limit, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.env, name)

    def reset(self, **kwargs: object) -> object:
        self.steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: str) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, reward, terminated, truncated or self.steps >= self.limit, info


class _TimeLimitedSession(BrowserSession):
    def _make_env(self, env_id: str, task_kwargs: dict, *, live: bool = False) -> object:
        return _TimeLimited(super()._make_env(env_id, task_kwargs, live=live), limit=1)


def test_an_episode_the_environment_truncates_is_not_closed_by_the_page(base_url: str):
    """gymnasium's `truncated` is a limit of the environment (a time limit), not the task ending: it
    was counted as `done`, the end the judge reads as the page closing the task."""
    from awm.evaluation.evidence import pre_decide

    with _TimeLimitedSession(BrowserSettings(pre_observation_delay=0.1)) as limited:
        trajectory = run_episode(limited, LabelScript(["click('{Documents}')"]), fixture_task(base_url, "toggle"), HarnessConfig(max_steps=5))
        assert limited.truncated and not limited.done
    assert [s.outcome for s in trajectory.steps] == ["ok"]
    assert trajectory.end == "max_steps"
    assert pre_decide(trajectory).label == "failure"
