"""`awm replay RUN EPISODE`: re-execute a recorded episode's actions on a fresh page, without the model.

Each recorded action is grounded again by its target (role + label) on a fresh page of the same task
and seed; the command prints every step's grounding and the final reward, and writes the replay's
trajectory (and screenshots) under ``RUN/replays/<replay id>/``. Exit 0 when the replay succeeded by
ground truth, 1 when it did not (so scripts can use it as a check), 2 on a user error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from awm.errors import AwmError

REPLAY_HELP = """Re-execute a recorded episode's actions on a fresh page of the same task and seed, without the model.

Each action is grounded again by its target's role and label (exact first; the structural fallback only
when it is unambiguous); each step's grounding and the final reward are printed and recorded under
RUN/replays/<id>/. Exit status: 0 replay succeeded, 1 it did not, 2 bad input.

Example: awm replay runs/miniwob-1 login-user#0"""


def register(app: typer.Typer) -> None:
    app.command("replay", help=REPLAY_HELP)(replay_command)


def replay_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (holds run.sqlite).", file_okay=False)],
    episode: Annotated[str, typer.Argument(help="Episode id, unique id prefix, or task key (task#seed).")],
) -> None:
    from awm.assets import configure_runtime_env
    from awm.config import load_settings
    from awm.files import write_text_atomic
    from awm.pipeline.replay import REPLAYS_DIR, recording_workflow, replay_workflow
    from awm.traces.db import open_run
    from awm.webarena.env import BrowserSession
    from awm.webarena.harness import StepCapture

    if not (Path(run_dir) / "run.sqlite").is_file():
        raise AwmError(f"{run_dir} is not a run folder (no run.sqlite); give the folder `awm run` wrote")
    with open_run(run_dir) as db:
        source = db.trajectory(episode)
    if source.task.benchmark == "mind2web":
        raise AwmError(f"episode {source.trajectory_id} is a Mind2Web prediction; only live-page episodes replay")
    workflow, skipped = recording_workflow(source)
    if not workflow.steps:
        raise AwmError(f"episode {source.trajectory_id} has no executed action on an element to replay")
    console = Console()
    console.print(
        f"replaying {source.trajectory_id} ({source.task.key}): {len(workflow.steps)} action(s)"
        + (f", skipping {len(skipped)} on no element: {', '.join(skipped)}" if skipped else "")
    )
    configure_runtime_env()
    settings = load_settings(None)
    shots: dict[int, bytes] = {}

    def keep_screenshot(_trajectory: object, step: object, capture: StepCapture | None) -> None:
        if capture is not None and capture.png is not None:
            shots[step.index] = capture.png  # type: ignore[attr-defined]

    with BrowserSession(settings.browser) as session:
        result = replay_workflow(session, workflow, {}, source, on_step=keep_screenshot)
    replay = result.trajectory
    out = Path(run_dir) / REPLAYS_DIR / replay.trajectory_id
    for index, png in shots.items():
        path = out / f"{index}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
        next(s for s in replay.steps if s.index == index).screenshot = str(path.relative_to(run_dir))
    write_text_atomic(out / "trajectory.json", replay.to_json())
    for step in replay.steps:
        if step.called_by is None:
            continue
        typer.echo(f"  {step.index:>2} {step.action_str or '-':<40} {step.outcome:<17} {step.grounding}")
    verdict = replay.verdict
    console.print(
        f"reward {verdict.reward} (raw {verdict.raw_reward}) -> {'success' if result.ok else 'failed'}: {result.reason}",
        markup=False,
    )
    console.print(f"recorded {out}")
    if not result.ok:
        raise typer.Exit(1)
