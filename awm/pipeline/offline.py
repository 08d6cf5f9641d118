"""Offline memory: induce once from earlier runs or datasets (`offline_from`), freeze, then solve.

Why frozen: the offline arm measures what a fixed memory, built before the test stream, is worth;
nothing learnt while solving may leak in. Induction happens per scope of the task stream, from the
inputs' trajectories in that scope, and is committed with a message naming the inputs, so a resumed
run finds the commit and neither calls the inducer nor commits again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rich.console import Console

from awm.errors import ConfigError
from awm.induction.commit import find_commit
from awm.pipeline.config import PipelineConfig
from awm.pipeline.stages import (
    PipelineContext,
    PipelineStageError,
    admit_stage,
    commit_stage,
    evaluate_stage,
    induce_stage,
    read_scope,
    stage_guard,
)
from awm.trajectory import Task, Trajectory


def offline_message(sources: list[Path], induction: str, admission: str) -> str:
    """The commit message of an offline induction: the same inputs and rules give the same message."""
    names = sorted(str(p) for p in sources)
    digest = hashlib.sha256("\n".join([*names, induction, admission]).encode()).hexdigest()[:12]
    return f"offline {induction} from {len(names)} source(s) (admission {admission}, inputs {digest})"


def load_sources(sources: list[Path], scope: str) -> list[Trajectory]:
    """Every trajectory of the inputs that belongs to `scope` (sorted by task key, never file order)."""
    from awm.induction.offline import in_scope, load_inputs

    found: list[Trajectory] = []
    with stage_guard("induce"):
        for path in sources:
            if not Path(path).exists():
                raise ConfigError(
                    f"offline_from path {path} does not exist (a run folder or trajectory file)"
                )
            found.extend(t for t in load_inputs(Path(path), scope=scope) if in_scope(t, scope))
    return sorted(found, key=lambda t: (t.task.key, t.trajectory_id))


def site_scopes_of(config: PipelineConfig, tasks: list[Task], sources: list[Path]) -> list[str]:
    """With ``scope = "site"``, every template scope of the tasks' sites that the inputs hold a
    trajectory of (sorted); else none.

    Why: a site-scope episode reads the site's *other* templates; an arm run on a few of a site's
    templates (a probe of its change templates, say) would otherwise read only what those few taught,
    and measure a smaller site than the demonstrations describe."""
    from awm.induction.offline import in_scope, load_inputs

    if config.memory_scope or config.scope != "site":
        return []
    sites = {read_scope(config, task) for task in tasks}
    found: set[str] = set()
    with stage_guard("induce"):
        for path in sources:
            if Path(path).exists():
                found.update(
                    t.task.scope for t in load_inputs(Path(path), scope="") if any(in_scope(t, s) for s in sites)
                )
    return sorted(found)


def induce_from_sources(
    ctx: PipelineContext, tasks: list[Task], *, console: Console | None = None
) -> dict[str, int | None]:
    """Induce and commit each scope's memory from `offline_from`; returns scope -> head version.

    Fails (naming the stage) when an input is missing, when no input trajectory is in any scope of
    the stream, when none passes admission, or when the inducer yields no workflow for any scope
    (an offline arm with nothing to freeze measures nothing). A scope the inducer teaches nothing is
    reported and left as it is.
    """
    config = ctx.config
    sources = list(config.offline_from)
    message = offline_message(sources, config.induction, config.admission)
    scopes = list(dict.fromkeys([*(t.scope for t in tasks), *site_scopes_of(config, tasks, sources)]))
    heads: dict[str, int | None] = {}
    loaded = admitted_total = 0
    reasons: list[str] = []
    for scope in scopes:
        done = find_commit(ctx.store, scope, message)
        if done is not None:
            heads[scope] = done.version
            loaded += 1
            admitted_total += 1
            continue
        trajectories = load_sources(sources, scope)
        loaded += len(trajectories)
        if not trajectories:
            heads[scope] = ctx.head_version(scope)
            continue
        if config.judge and config.admission in ("judge", "both", "any"):
            trajectories = evaluate_stage(
                [t for t in trajectories if t.verdict.judge is None], ctx=ctx, record=False
            ) + [t for t in trajectories if t.verdict.judge is not None]
        admitted = admit_stage(trajectories, rule=config.admission)
        admitted_total += len(admitted.admitted)
        if not admitted.admitted:
            heads[scope] = ctx.head_version(scope)
            continue
        outcome = induce_stage(admitted.admitted, mode=config.induction, ctx=ctx)
        if not outcome.candidates:
            reasons.append(f"{scope}: {outcome.reason}")
            heads[scope] = ctx.head_version(scope)
            if console is not None:
                console.print(f"offline memory {scope}: no workflow ({outcome.reason})")
            continue
        from awm.pipeline.replay import verify_for_arm

        candidates, refused = verify_for_arm(ctx, outcome.candidates, admitted.admitted)
        if not candidates:
            reasons.append(f"{scope}: replay refused every candidate: {'; '.join(refused)}")
            heads[scope] = ctx.head_version(scope)
            if console is not None:
                console.print(f"offline memory {scope}: no workflow (replay refused {'; '.join(refused)})")
            continue
        version = commit_stage(
            ctx.store,
            scope,
            candidates,
            author=f"offline-{config.induction}",
            message=message,
            provenance={
                "sources": [str(p) for p in sources],
                "trajectory_ids": admitted.admitted_ids,
                "admission": config.admission,
                "verify": config.verify,
                "replay_refused": refused,
            },
        )
        heads[scope] = version.version if version is not None else ctx.head_version(scope)
        if console is not None:
            console.print(
                f"offline memory {scope}: version {heads[scope]} from {len(admitted.admitted)} trajectories"
            )
    if loaded == 0:
        raise PipelineStageError(
            "induce",
            f"none of the trajectories in {', '.join(str(p) for p in sources)} is in the stream's scopes "
            f"({', '.join(scopes)})",
        )
    if admitted_total == 0:
        raise PipelineStageError(
            "admit",
            f"no trajectory from {', '.join(str(p) for p in sources)} passes admission '{config.admission}'",
        )
    if reasons and all(v is None for v in heads.values()):
        raise PipelineStageError("induce", "; ".join(reasons))
    return heads
