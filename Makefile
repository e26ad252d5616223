# The two commands (README): `make run` sets up and runs the main job; `make test` sets up and runs the tests.
.PHONY: run test setup setup-dev bench lint

run: setup
	.venv/bin/worldsmith --help
	.venv/bin/worldsmith llm ping
	bash scripts/demo.sh

test: setup-dev
	bash scripts/test.sh

setup:
	bash scripts/setup.sh

setup-dev:
	bash scripts/setup.sh --dev

bench: setup-dev
	.venv/bin/python benchmarks/llm_overhead.py
	.venv/bin/python benchmarks/sandbox.py
	.venv/bin/python benchmarks/worlds.py
