# The two commands of the README. Both run the same idempotent set-up first.
.PHONY: setup demo test lint bench
VENV ?= .venv

setup:
	@bash scripts/setup.sh

demo: setup
	$(VENV)/bin/awm ablate configs/miniwob-demo.toml

test: setup
	$(VENV)/bin/ruff check awm tests scripts
	$(VENV)/bin/python -m pytest -q --durations=15

lint: setup
	$(VENV)/bin/ruff check awm tests scripts

bench: setup
	for b in scripts/bench_*.py; do $(VENV)/bin/python $$b || exit 1; done
