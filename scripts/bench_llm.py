"""Benchmark the embedded model: prompt and generation speed, cold vs warm (prefix-cached) decision latency.

Why: the agent's budget is dominated by the model; keeping the stable text first (system, memory) and the
changing page/tail last only pays off if llama.cpp's prefix cache works, which this shows side by side.
Figures come from the server's own `timings` field where it sends one.

Usage: python scripts/bench_llm.py [--prompt-tokens 1500] [--warm-repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from awm.assets import configure_runtime_env, verify_model_file
from awm.config import load_settings
from awm.llm.base import ChatRequest
from awm.llm.local_server import ensure_local_server
from awm.llm.openai_backend import build_chat_kwargs

DECISION_GRAMMAR = 'root ::= "click(\'" [0-9]+ "\')" | "fill(\'" [0-9]+ "\', \'" [a-zA-Z ]+ "\')"'
SYSTEM = (
    "You are a web agent. You see the page as an accessibility tree; each element has a numeric id in "
    "brackets. Reply with exactly one action: click('ID') or fill('ID', 'TEXT'). Use only ids on the page."
)
ROLES = ("button", "link", "textbox", "checkbox", "combobox", "StaticText", "heading", "listitem")
WORDS = ("Submit", "Cancel", "Search flights", "From", "To", "Departure date", "Return", "One way", "Passengers",
         "Continue", "Help", "Sign in", "Price", "Sort by", "Filter", "Next page", "Previous", "Details")  # fmt: skip


@dataclass
class Row:
    case: str
    prompt_tokens: int
    evaluated: int | None
    prompt_ms: float | None
    prompt_tps: float | None
    gen_tokens: int
    gen_tps: float | None
    wall_s: float
    text: str


def page_text(n_lines: int, variant: int = 0) -> str:
    """A synthetic accessibility tree (deterministic), the size of a busy MiniWoB/WebArena page."""
    lines = ["RootWebArea 'Book a flight'"]
    for i in range(n_lines):
        role = ROLES[(i * 7 + variant) % len(ROLES)]
        label = WORDS[(i * 5 + variant) % len(WORDS)]
        lines.append(f"{'  ' * (1 + i % 3)}[{100 + i}] {role} '{label} {i % 13}'")
    return "\n".join(lines)


def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST to the local server (stdlib only: the bench needs nothing the package does not)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - local URL
        return json.loads(response.read())


def count_tokens(root: str, text: str) -> int:
    return len(post_json(f"{root}/tokenize", {"content": text})["tokens"])


def call(base_url: str, model: str, case: str, request: ChatRequest) -> Row:
    kwargs = build_chat_kwargs(request, model, llama_cpp=True)
    body: dict[str, Any] = {k: v for k, v in kwargs.items() if k != "extra_body"} | kwargs.get(
        "extra_body", {}
    )
    started = time.perf_counter()
    data = post_json(f"{base_url}/chat/completions", body)
    wall = time.perf_counter() - started
    timings = data.get("timings") or {}
    usage = data.get("usage") or {}
    return Row(
        case=case,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        evaluated=timings.get("prompt_n"),
        prompt_ms=timings.get("prompt_ms"),
        prompt_tps=timings.get("prompt_per_second"),
        gen_tokens=int(usage.get("completion_tokens", 0)),
        gen_tps=timings.get("predicted_per_second"),
        wall_s=wall,
        text=data["choices"][0]["message"]["content"],
    )


def messages_for(page: str, tail: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Page:\n{page}\n\nGoal: {tail}\nAction:"},
    ]


def fit_page(root: str, target_tokens: int) -> str:
    """Grow the synthetic page until the whole prompt is about `target_tokens` long."""
    lines = max(10, target_tokens // 9)
    for _ in range(6):
        page = page_text(lines)
        have = count_tokens(root, SYSTEM + page) + 30
        if abs(have - target_tokens) < target_tokens * 0.03:
            break
        lines = max(10, int(lines * target_tokens / have))
    return page_text(lines)


def fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=1500)
    parser.add_argument("--warm-repeats", type=int, default=3)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    configure_runtime_env()
    settings = load_settings(overrides={"llm": {"backend": "local"}})
    threads = args.threads or settings.llm.local_threads
    verify_model_file(settings.model_file)
    t0 = time.perf_counter()
    base_url = ensure_local_server(
        settings.model_file,
        n_ctx=settings.llm.context_window,
        threads=threads,
        log_dir=settings.home / "logs",
    )
    startup = time.perf_counter() - t0
    root = base_url.removesuffix("/v1")
    model = settings.model_file.stem
    page = fit_page(root, args.prompt_tokens)

    rows: list[Row] = []
    goals = [
        "Click the Submit button.",
        "Type 'Boston' into the From box.",
        "Click Next page.",
        "Click Help.",
    ]
    decide = dict(max_tokens=16, grammar=DECISION_GRAMMAR)
    rows.append(
        call(base_url, model, "cold decision", ChatRequest(messages=messages_for(page, goals[0]), **decide))
    )
    for i in range(args.warm_repeats):
        goal = goals[1 + i % (len(goals) - 1)] + f" (step {i + 2})"
        rows.append(
            call(
                base_url,
                model,
                f"warm decision {i + 1} (new tail)",
                ChatRequest(messages=messages_for(page, goal), **decide),
            )
        )
    free = ChatRequest(messages=messages_for(page, goals[-1] + " Reply with only the action."), max_tokens=16)
    rows.append(call(base_url, model, "warm decision, no grammar", free))
    short = [
        {"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}
    ]
    rows.append(
        call(
            base_url,
            model,
            f"generation ({args.gen_tokens} tokens)",
            ChatRequest(messages=short, max_tokens=args.gen_tokens),
        )
    )

    print(
        f"embedded model {model}, {threads} threads, n_ctx {settings.llm.context_window}; server start {startup:.1f} s"
    )
    header = f"{'case':<32} {'prompt tok':>10} {'evaluated':>9} {'prompt ms':>10} {'prompt tok/s':>12} {'gen tok':>7} {'gen tok/s':>9} {'wall s':>7}  reply"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.case:<32} {row.prompt_tokens:>10} {fmt(row.evaluated, 'd'):>9} {fmt(row.prompt_ms, '.0f'):>10} "
            f"{fmt(row.prompt_tps, '.1f'):>12} {row.gen_tokens:>7} {fmt(row.gen_tps, '.1f'):>9} {row.wall_s:>7.2f}  {row.text[:40]!r}"
        )
    warm = [r.wall_s for r in rows[1 : 1 + args.warm_repeats]]
    if warm:
        print(
            f"\ncold first decision {rows[0].wall_s:.2f} s vs warm (prefix cached) median {sorted(warm)[len(warm) // 2]:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
