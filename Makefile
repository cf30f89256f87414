# Each target sets up its own .venv, so a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@# The browser tests drive Debian's chromium (Playwright's own browser download is not used).
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "note: could not install chromium (apt-get install -y chromium): browser tests will skip, and fail under CI=true"
	touch $(STAMP)

.PHONY: demo test test-heavy bench bench-ops langgraph-suite fuzz
demo: $(STAMP)
	$(BIN)/threadline demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Every figure of benchmarks/RESULTS.md, side by side with the official savers. The scale run
# here: 300 threads × 50 supersteps and one thread of 20,000 (scale.py's own defaults are issue
# 14's 10,000 threads: 51 min for the four savers on this 2-core machine, quiet, see RESULTS.md):
# `make bench SCALE_ARGS=` for the issue's sizes.
SCALE_ARGS ?= --threads 300
bench: $(STAMP)
	$(BIN)/python benchmarks/run.py --write-results
	$(BIN)/python benchmarks/scale.py --write-results $(SCALE_ARGS)
	$(BIN)/python benchmarks/concurrency.py --write-results $(CONCURRENCY_ARGS)
	$(BIN)/python benchmarks/seed002.py --write-results $(SEED002_ARGS)
	$(BIN)/python benchmarks/redis_bench.py $(REDIS_BENCH_ARGS)

# Longer runs of the multi-process tests (4 writers, 2 sweepers): more threads and turns.
test-heavy: $(STAMP)
	THREADLINE_HEAVY=1 $(BIN)/python -m pytest -q tests/test_sweeper.py

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
