# The two commands of the README. Both run the same idempotent set-up first.
.PHONY: setup demo demo-miniwob test lint bench docs
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
	$(VENV)/bin/ruff check awm tests scripts docs/hooks
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(VENV)/bin/python -m pytest -q --durations=15

lint: setup
	$(VENV)/bin/ruff check awm tests scripts docs/hooks

# The docs site (mkdocs.yml) on http://127.0.0.1:8000, rebuilt on every save; `make test` builds it --strict.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict -a 127.0.0.1:8000

bench: setup
	for b in scripts/bench_*.py; do $(VENV)/bin/python $$b || exit 1; done
