# Each target sets up its own .venv, so a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

.PHONY: demo test bench langgraph-suite fuzz
demo: $(STAMP)
	$(BIN)/threadline demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py --write-results

# LangGraph's own test suites with threadline's savers substituted (slow; not part of
# `make test`). Needs Postgres at THREADLINE_TEST_POSTGRES. See docs/compatibility.md.
langgraph-suite: $(STAMP)
	$(BIN)/python compat/langgraph_suite.py $(SUITE_ARGS)

# The stored-row fuzz test at full size: 10,000 mutations per backend and codec (checksum,
# encrypted); `make test` runs 150. Needs Postgres at THREADLINE_TEST_POSTGRES. See docs/security.md.
fuzz: $(STAMP)
	THREADLINE_FUZZ_MUTATIONS=$(or $(MUTATIONS),10000) $(BIN)/python -m pytest -q -s tests/test_fuzz.py
