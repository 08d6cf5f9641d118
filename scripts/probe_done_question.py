"""Ask the live done check's question two ways over recorded steps: yes/no, and "what remains".

What it does: for every step of the `scripts/bench_live.py` run folders given whose page visibly reacted
(the steps the agent's done check is asked about), it asks the configured model (the embedded one by
default, response cache off) the done check's yes/no question (`awm.webarena.agent.done_question`)
and the same facts ending in "What part of the goal is not done yet? Answer nothing if all of it is
done." under a grammar that allows "nothing" or "not done: <words>". It prints one line per step and
the counts; whether each step had reached the goal is the reader's to judge from the line.

Why: the issue asked that the done check say what remains of the goal, not only yes or no. This is
the measurement that decides whether the embedded model can.

Run: .venv/bin/python scripts/probe_done_question.py RUN [RUN ...]   (e.g. runs/live-3)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from awm.config import load_settings
from awm.llm.base import ChatRequest
from awm.llm.factory import make_client
from awm.trajectory import Step
from awm.webarena.agent import DONE_GRAMMAR, DONE_SYSTEM, done_question
from awm.webarena.workflow_run import ENDING_ACTIONS

REMAINS_SYSTEM = "Say what is left to do."
REMAINS_QUESTION = "What part of the goal is not done yet? Answer nothing if all of it is done."
REMAINS_GRAMMAR = 'root ::= "nothing" | "not done: " [^\\n]{1,60}\n'


def reacted_steps(run: Path) -> list[tuple[str, str, Step]]:
    """(page, goal, step) for each step of the run's trajectories whose page reacted to an action."""
    found = []
    for path in sorted((run / "trajectories").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for raw in record["steps"]:
            step = Step.model_validate(raw)
            if step.reaction and (step.action or {}).get("name") not in ENDING_ACTIONS:
                found.append((path.stem, record["task"]["goal"], step))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("runs", type=Path, nargs="+", help="bench_live.py run folders (OUT)")
    args = parser.parse_args(argv)
    client = make_client(load_settings(), use_cache=False)

    def ask(system: str, question: str, grammar: str, max_tokens: int) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        request = ChatRequest(messages=messages, temperature=0.0, max_tokens=max_tokens, grammar=grammar, purpose="actor")
        return client.chat(request).text.strip()

    yes = nothing = total = 0
    for run in args.runs:
        for page, goal, step in reacted_steps(run):
            question = done_question(goal, step)
            answer = ask(DONE_SYSTEM, question, DONE_GRAMMAR, 3)
            remains = ask(REMAINS_SYSTEM, question.rsplit("\n", 1)[0] + "\n" + REMAINS_QUESTION, REMAINS_GRAMMAR, 24)
            total += 1
            yes += answer.lower().startswith("yes")
            nothing += remains.lower().startswith("nothing")
            print(f"{run.name}/{page} step {step.index}: yes/no={answer!r} remains={remains!r} | {step.action_str} -> {step.reaction[:70]!r}")
    print(f"{total} reacted steps: yes {yes}, 'nothing' remains {nothing}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
