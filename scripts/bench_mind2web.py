"""Throughput of the Mind2Web consumer on a synthetic split: load, prune, prompt build, scoring.

Why synthetic: the real splits cannot be shipped (test splits must not be redistributed) and are GBs; a
generated split with realistic page sizes (50-200 KB of cleaned_html per step, a raw_html about as large,
hundreds of candidates with JSON-string attributes) measures the same code paths.

Run: .venv/bin/python scripts/bench_mind2web.py [--tasks 1000] [--prune-steps 300]
Prints one table (wall and process-CPU seconds: on a shared machine the CPU figure is the stable one); the `prune`/`prompt` rows need `awm.mind2web.prune.prune_html` and
`awm.mind2web.prompt.build_step_prompt` (or `build_prompt`) and are skipped with a note when missing.
Then one line per top-k and prompt budget with the page renders per step (a render: one walk that writes the
page's text) and the CPU time per step of `build_step_prompt`, compact (the old path) beside mindact.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from awm.mind2web.data import iter_records, step_key
from awm.mind2web.metrics import score
from awm.mind2web.schema import TaskRecord

WEBSITES = [
    ("shopstore", "Shopping", "General"),
    ("flyaway", "Travel", "Airlines"),
    ("tixnow", "Entertainment", "Events"),
]


def _block(n: int, rng: random.Random) -> str:
    """About 230 bytes of MindAct-style cleaned html: a row with a link, a text and a button."""
    return (
        f'<div backend_node_id="{n}" class="row r{n % 7}"><a backend_node_id="{n + 1}" href="/p/{n}" '
        f'aria_label="Product {n}"><text backend_node_id="{n + 2}">Product {n} {rng.choice(WORDS)} '
        f'{rng.choice(WORDS)}</text></a><span backend_node_id="{n + 3}">${n % 500}.99</span>'
        f'<button backend_node_id="{n + 4}" aria_label="Add to cart" type="button"></button></div>'
    )


WORDS = "red blue large small cotton steel wireless classic deluxe travel pro mini ultra lite max".split()


def _page(kb: int, rng: random.Random) -> tuple[str, list[str]]:
    """A cleaned_html page of about `kb` KB and the ids of its clickable elements."""
    parts = ['<html backend_node_id="1"><body backend_node_id="2"><div backend_node_id="3" class="main">']
    ids: list[str] = []
    size, n = 0, 10
    while size < kb * 1024:
        block = _block(n, rng)
        parts.append(block)
        ids += [str(n + 1), str(n + 4)]
        size += len(block)
        n += 5
    parts.append("</div></body></html>")
    return "".join(parts), ids


def _candidate(node_id: str, top: bool) -> dict:
    attrs = {
        "backend_node_id": node_id,
        "bounding_box_rect": "110,607.390625,224,42",
        "class": "row-link product-title",
        "aria_label": f"Product {node_id}",
        "data_pw_testid_buckeye_candidate": "1",
    }
    return {
        "tag": "a",
        "attributes": json.dumps(attrs),
        "backend_node_id": node_id,
        "is_original_target": top,
        "is_top_level_target": top,
    }


def generate(root: Path, tasks: int, kb_min: int, kb_max: int, seed: int, per_file: int = 100) -> int:
    """Write `tasks` synthetic tasks as ROOT/train/train_<n>.json; returns the bytes written."""
    rng = random.Random(seed)
    folder = root / "train"
    folder.mkdir(parents=True)
    written = 0
    for start in range(0, tasks, per_file):
        batch = []
        for t in range(start, min(tasks, start + per_file)):
            website, domain, sub = WEBSITES[t % len(WEBSITES)]
            actions, reprs = [], []
            for k in range(rng.randint(2, 5)):
                cleaned, ids = _page(rng.randint(kb_min, kb_max), rng)
                raw = cleaned.replace('class="row', 'style="display:flex;margin:0 4px" class="row')
                target = rng.choice(ids)
                negs = rng.sample([i for i in ids if i != target], min(len(ids) - 1, rng.randint(150, 400)))
                op = "TYPE" if k % 3 == 1 else "CLICK"
                value = f"query {t} {k}" if op == "TYPE" else ""
                actions.append(
                    {
                        "action_uid": f"s{t}-{k}",
                        "raw_html": raw,
                        "cleaned_html": cleaned,
                        "operation": {"original_op": op, "value": value, "op": op},
                        "pos_candidates": [_candidate(target, True)],
                        "neg_candidates": [_candidate(i, False) for i in negs],
                    }
                )
                reprs.append(f"[link]  Product {target} -> {op}" + (f": {value}" if value else ""))
            batch.append(
                {
                    "annotation_id": f"bench-{t:05d}",
                    "confirmed_task": f"Buy product number {t} in red.",
                    "website": website,
                    "domain": domain,
                    "subdomain": sub,
                    "action_reprs": reprs,
                    "actions": actions,
                }
            )
        text = json.dumps(batch)
        (folder / f"train_{start // per_file}.json").write_text(text, encoding="utf-8")
        written += len(text.encode("utf-8"))
    return written


def _predictions(records: list[TaskRecord], seed: int) -> dict[str, str]:
    """About 60% right answers, 30% a wrong id, 10% prose without an action."""
    rng = random.Random(seed)
    out = {}
    for record in records:
        for action in record.actions:
            key = step_key(record.annotation_id, action.action_uid)
            roll = rng.random()
            op, value = action.operation.op, action.operation.value
            target = action.target_id if roll < 0.6 else "999999"
            text = f"`{op} [{target}]`" if op == "CLICK" else f"`{op} [{target}] [{value}]`"
            out[key] = text if roll < 0.9 else "I am not sure which element to use."
    return out


# (label, context window, completion tokens): roomy prompts, and tight ones that make the page re-pruned.
PAGE_BUDGETS = (
    ("32k window", 32768, 256),
    ("4k window", 4096, 256),
    ("1.5k window", 1536, 256),
    ("1k window", 1024, 256),
)


Config = tuple[int, str, int, int, str]  # top-k, budget label, context window, completion tokens, format


def _page_configs() -> list[Config]:
    """compact (the old path) beside mindact, at the run's default top-10 and the bench's top-50."""
    return [
        (top, label, window, completion, page_format)
        for top in (10, 50)
        for label, window, completion in PAGE_BUDGETS
        for page_format in ("compact", "mindact")
    ]


def _page_format_lines(sample: list[tuple[TaskRecord, int]], keep_of: dict) -> list[str]:
    """Page renders per step and CPU ms per step of `build_step_prompt`, one line per top-k and budget.

    As in `solve_task`, each step's compact parse (which ranking needs in either format) is made once,
    outside the timing, and given to every build: the time is what the page format itself costs
    (compact renders, or mindact's lxml parse, index and render).
    """
    from awm.errors import PromptTooLargeError
    from awm.mind2web.prompt import build_step_prompt
    from awm.mind2web.prune import parse_dom
    from awm.tokens import CharEstimateCounter

    configs = _page_configs()
    renders: dict[Config, list[int]] = {c: [] for c in configs}
    cpu = dict.fromkeys(configs, 0.0)
    counter = CharEstimateCounter()
    for record, k in sample:
        action = record.actions[k]
        dom = parse_dom(action.cleaned_html)
        for config in configs:
            top, _, window, completion, page_format = config
            c0 = time.process_time()
            try:
                prompt = build_step_prompt(
                    record,
                    action,
                    keep_of[(record.annotation_id, k)][:top],
                    counter=counter,
                    context_window=window,
                    completion_tokens=completion,
                    dom=dom,
                    page_format=page_format,  # type: ignore[arg-type]
                )
                renders[config].append(prompt.page_renders)
            except PromptTooLargeError:
                pass
            cpu[config] += time.process_time() - c0
    lines = []
    for top, label, window, completion, _ in configs[::2]:
        cells = []
        for page_format in ("compact", "mindact"):
            config = (top, label, window, completion, page_format)
            done, n = renders[config], max(len(renders[config]), 1)
            cells.append(
                f"{page_format} {sum(done) / n:6.1f} renders/step (max {max(done, default=0):4d}), "
                f"{1000 * cpu[config] / max(len(sample), 1):6.1f} cpu-ms/step"
            )
        lines.append(f"page renders, top-{top:<2}, {label:11}: " + "  |  ".join(cells))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--kb-min", type=int, default=50)
    parser.add_argument("--kb-max", type=int, default=200)
    parser.add_argument("--prune-steps", type=int, default=300, help="steps to prune / build prompts for")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows: list[tuple[str, int, float, float, str]] = []  # name, items, wall s, cpu s, note
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-m2w-") as tmp:
        root = Path(tmp)
        t0, c0 = time.perf_counter(), time.process_time()
        size = generate(root, args.tasks, args.kb_min, args.kb_max, args.seed)
        gen_s, gen_s_cpu = time.perf_counter() - t0, time.process_time() - c0
        mb = size / 1e6
        notes.append(
            f"synthetic split: {args.tasks} tasks, {mb:.0f} MB in files of 100 tasks, built in {gen_s:.1f} s ({gen_s_cpu:.1f} cpu-s)"
        )

        t0, c0 = time.perf_counter(), time.process_time()
        steps = 0
        sample: list[tuple[TaskRecord, int]] = []
        for record in iter_records(root, "train"):
            steps += len(record.actions)
            for k in range(len(record.actions)):
                if len(sample) < args.prune_steps:
                    sample.append((record, k))
        load_s, load_s_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(
            (
                "load (with html)",
                args.tasks,
                load_s,
                load_s_cpu,
                f"{mb / load_s_cpu:.0f} MB per cpu-s, {steps} steps",
            )
        )

        t0, c0 = time.perf_counter(), time.process_time()
        light = list(iter_records(root, "train", with_html=False))
        light_s, light_s_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(
            ("load (with_html=False)", len(light), light_s, light_s_cpu, "html decoded, then dropped")
        )

        keep_of = {}
        for record, k in sample:
            action = record.actions[k]
            ids = [c.backend_node_id for c in action.pos_candidates + action.neg_candidates[:49]]
            keep_of[(record.annotation_id, k)] = ids
        try:
            from awm.mind2web.prune import prune_html
        except ImportError as exc:
            notes.append(f"prune skipped: {exc}")
        else:
            t0, c0 = time.perf_counter(), time.process_time()
            chars = 0
            for record, k in sample:
                chars += len(prune_html(record.actions[k].cleaned_html, keep_of[(record.annotation_id, k)]))
            prune_s, prune_s_cpu = time.perf_counter() - t0, time.process_time() - c0
            rows.append(
                (
                    "prune_html (top-50)",
                    len(sample),
                    prune_s,
                    prune_s_cpu,
                    f"{chars // max(len(sample), 1)} chars/page out",
                )
            )
        try:
            from awm.mind2web import prompt as prompt_mod
            from awm.tokens import CharEstimateCounter

            build = getattr(prompt_mod, "build_step_prompt", None) or prompt_mod.build_prompt
        except (ImportError, AttributeError) as exc:
            notes.append(f"prompt build skipped: {exc}")
        else:
            counter = CharEstimateCounter()
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                for record, k in sample:
                    build(
                        record,
                        record.actions[k],
                        keep_of[(record.annotation_id, k)],
                        counter=counter,
                        context_window=32768,
                        completion_tokens=256,
                    )
            except TypeError as exc:
                notes.append(f"prompt build skipped (signature changed): {exc}")
            else:
                build_s, build_s_cpu = time.perf_counter() - t0, time.process_time() - c0
                rows.append(
                    (
                        "build_step_prompt (incl. prune)",
                        len(sample),
                        build_s,
                        build_s_cpu,
                        "CharEstimateCounter",
                    )
                )

        preds = _predictions(light, args.seed)
        t0, c0 = time.perf_counter(), time.process_time()
        report = score(light, preds)
        score_s, score_s_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(
            (
                "score (records in memory)",
                len(light),
                score_s,
                score_s_cpu,
                f"{len(preds) / score_s_cpu:,.0f} steps per cpu-s; step SR {report.micro.step_success_rate:.1f}",
            )
        )
        t0, c0 = time.perf_counter(), time.process_time()
        score(iter_records(root, "train", with_html=False), preds)
        e2e_s, e2e_s_cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(("score (load + score, as the CLI)", args.tasks, e2e_s, e2e_s_cpu, ""))

        page_lines = _page_format_lines(sample, keep_of)

    # cpu seconds are the honest figure on a shared machine; wall seconds include waiting for a core
    print(f"{'stage':34} {'items':>6} {'wall s':>8} {'cpu s':>8} {'items/cpu-s':>12}  note")
    for name, items, wall, cpu, note in rows:
        print(f"{name:34} {items:>6} {wall:>8.2f} {cpu:>8.2f} {items / max(cpu, 1e-9):>12.1f}  {note}")
    for line in page_lines:
        print(line)
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
