# Each target sets up its own .venv, so a fresh clone needs nothing else installed.
# `make demo` installs threadline's base install and the ui extra (the demo ends by pointing
# at `threadline ui`): a venv without pip, uv installed into it from PyPI, and uv fetching the
# dependencies in parallel (about 20 s on a busy 2-core machine; Python compiles what the demo
# imports as it first runs). `make test` and the other targets add pip and the [test] extra
# (every extra, `threadline[all]`, and the test tools) to the same .venv (about a minute
# more), and `make test` Debian's chromium for the browser tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
DOCS := $(VENV)/.docs

$(RUNTIME): pyproject.toml
	@echo "make: installing threadline (base install and the ui extra) into $(VENV) (about 20 s the first time)"
	$(PY) -m venv --without-pip $(VENV)
	@# uv into the venv with the system's pip when it has one (pip >= 22.3), else with the venv's own
	$(PY) -m pip --python $(BIN)/python install -q uv 2>/dev/null \
		|| { $(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q uv; }
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[ui]'
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	@echo "make: adding every extra and the test tools (the [test] extra) to $(VENV) (about a minute the first time)"
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

.PHONY: demo test browser test-heavy bench bench-ops langgraph-suite fuzz docs
demo: $(RUNTIME)
	$(BIN)/threadline demo

# The documentation site (mkdocs.yml) into site/: the guides of docs/, the API reference from the
# docstrings and the CLI reference from the commands themselves (docs/hooks/), built with
# --strict: a warning, a broken link or anchor fails it. Adds the [docs] extra to .venv.
$(DOCS): $(RUNTIME)
	@echo "make: adding the docs tools (the [docs] extra) to $(VENV)"
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[docs]'
	touch $(DOCS)

docs: $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The suite needs Postgres (THREADLINE_TEST_POSTGRES, default postgresql://postgres@127.0.0.1:5432/test)
# and Redis (THREADLINE_TEST_REDIS, default redis://127.0.0.1:6379/0); without them their tests skip.
test: $(STAMP) browser
	$(BIN)/python -m pytest -q

# The browser tests drive Debian's chromium (Playwright's own browser download is not used).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "make test: installing Debian's chromium for the browser tests (apt-get install chromium: about 110 packages, 45 s)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
			|| echo "note: could not install chromium (as root: apt-get install -y chromium): browser tests will skip, and fail under CI=true"; }

# Every figure of benchmarks/RESULTS.md, side by side with the official savers: first the start
# times of the command and of `from threadline import SqliteSaver` (about a minute). The scale run
# here: 300 threads × 50 supersteps and one thread of 20,000 (scale.py's own defaults are issue
# 14's 10,000 threads: 51 min for the four savers on this 2-core machine, quiet, see RESULTS.md):
# `make bench SCALE_ARGS=` for the issue's sizes.
# The chat fleet (issue 28): 200 threads × 4 turns sync, 96 async, 5 interleaved pairs of the
# official and threadline savers, each run in fresh processes: 25 min on this 2-core machine
# under a load of 4–7 (`CHAT_FLEET_ARGS=--pairs 2` for a quicker look; `--profile DIR` adds
# cProfile and py-spy profiles of the SQLite fleet).
# Per call CPU (issue 43, target 1): the chat fleet's recorded conversation replayed call by call on
# the official and threadline savers, open at once and interleaved, plus cold gets and time travel
# through the graph: about 2 minutes (`PER_CALL_ARGS=--rounds 9` for a steadier median).
# LangGraph's benchmark graphs (issue 43, target 2): react_agent with 10 and 100 tool calls,
# wide_state(300), sequential with 100 no-op nodes and fanout_to_subgraph with 10 Sends, each on the
# official and threadline savers (SQLite and Postgres) open at once, 5 runs each, interleaved: about
# 5 minutes (`LG_GRAPHS_ARGS=--runs 9` for a steadier median, `--graphs NAME,...` for some).
SCALE_ARGS ?= --threads 300
PER_CALL_ARGS ?=
LG_GRAPHS_ARGS ?=
bench: $(STAMP)
	$(BIN)/python benchmarks/startup.py --write-results $(STARTUP_ARGS)
	$(BIN)/python benchmarks/run.py --write-results
	$(BIN)/python benchmarks/chat_fleet.py --write-results $(CHAT_FLEET_ARGS)
	$(BIN)/python benchmarks/per_call.py --write-results $(PER_CALL_ARGS)
	$(BIN)/python benchmarks/lg_graphs.py --write-results $(LG_GRAPHS_ARGS)
	$(BIN)/python benchmarks/scale.py --write-results $(SCALE_ARGS)
	$(BIN)/python benchmarks/concurrency.py --write-results $(CONCURRENCY_ARGS)
	$(BIN)/python benchmarks/seed002.py --write-results $(SEED002_ARGS)
	$(BIN)/python benchmarks/redis_bench.py $(REDIS_BENCH_ARGS)

# Longer runs: the multi-process tests (4 writers, 2 sweepers) with more threads and turns, and
# 100 drawn sequences (not 40) in the Postgres side-by-side property test.
test-heavy: $(STAMP)
	THREADLINE_HEAVY=1 $(BIN)/python -m pytest -q tests/test_sweeper.py tests/test_side_by_side.py

# The supported range at both ends, each in a fresh venv of .cache/ends/: Python 3.11 with the
# lowest LangGraph, langgraph-checkpoint and langchain-core the floors allow, and Python 3.13 with
# the newest; a representative subset of the suite in each (docs/compatibility.md). Needs Postgres
# and Redis as `make test` does; 3–4 minutes on 2 busy cores, so not part of `make test`.
.PHONY: test-ends
test-ends: $(RUNTIME)
	$(BIN)/python compat/ends.py $(ENDS_ARGS)

# Bytes on disk after sweeps, vacuum and monthly partitions (docs/operations.md).
bench-ops: $(STAMP)
	$(BIN)/python benchmarks/shrink.py
	$(BIN)/python benchmarks/partitions.py

# LangGraph's own test suites with threadline's savers substituted (slow; not part of
# `make test`): the SQLite and Postgres savers, the stores and caches, and the Redis savers
# (langgraph-redis: LangGraph's graph tests on RedisSaver / AsyncRedisSaver). Needs Postgres
# at THREADLINE_TEST_POSTGRES and plain Redis at THREADLINE_TEST_REDIS. See docs/compatibility.md.
langgraph-suite: $(STAMP)
	$(BIN)/python compat/langgraph_suite.py $(SUITE_ARGS)

# The stored-row fuzz test at full size: 10,000 mutations per backend and codec (checksum,
# encrypted); `make test` runs 150. Needs Postgres at THREADLINE_TEST_POSTGRES. See docs/security.md.
fuzz: $(STAMP)
	THREADLINE_FUZZ_MUTATIONS=$(or $(MUTATIONS),10000) $(BIN)/python -m pytest -q -s tests/test_fuzz.py
