# The two commands of the README. Both run the same idempotent set-up first.
.PHONY: setup demo demo-miniwob test lint bench
VENV ?= .venv

setup:
	@bash scripts/setup.sh

# The main job (`awm demo`): memory off vs online executable memory started from the train instances'
# replayed demonstrations, on three Trac templates of the arena (configs/sites-demo.toml).
demo: setup
	$(VENV)/bin/awm demo

demo-miniwob: setup
	$(VENV)/bin/awm demo --config configs/miniwob-demo.toml

test: setup
	$(VENV)/bin/ruff check awm tests scripts
	$(VENV)/bin/python -m pytest -q --durations=15

lint: setup
	$(VENV)/bin/ruff check awm tests scripts

bench: setup
	for b in scripts/bench_*.py; do $(VENV)/bin/python $$b || exit 1; done
