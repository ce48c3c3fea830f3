# ane-kdma: every target creates .venv (pip install -e .) when it is missing.
# The test parameters live in Python (tb/, tests/); this file only picks the
# simulator and calls pytest or the CLI.

SIM    ?= verilator
comma  := ,
JOBS   ?= 2
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
CLI    := $(VENV)/bin/ane-kdma
export SIM

.PHONY: all demo test test-model test-rtl regress waves lint formal mutants bench clean

all: test

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The main job: the real M3 register dumps replayed on the RTL beside the
# measurement, the erratum at k x 0x4000 on the RTL, validation, and the plots.
demo: $(VENV)/.installed
	$(CLI) replay --engine rtl data/dumps/m3_n4096_d2044.txt data/dumps/m3_n4096_d2048.txt data/dumps/m3_n4096_d2052.txt
	$(CLI) erratum --engine rtl
	$(CLI) validate
	$(CLI) sweep --out out

# Everything: pure-Python tests, then the cocotb testbenches on $(SIM).
test: $(VENV)/.installed
	$(PYTEST) -n $(JOBS) tests tb

test-model: $(VENV)/.installed
	$(PYTEST) -n $(JOBS) tests

test-rtl: $(VENV)/.installed
	$(PYTEST) -n $(JOBS) tb

# Full scale on any simulator: laps k = 1..8 and 8 MiB integrity sizes.
regress: $(VENV)/.installed
	KDMA_FULL=1 $(PYTEST) -n $(JOBS) tb

# Wave dumps of a buggy and a fixed 0x4000-line transfer, for tb/waves/kdma.gtkw.
waves: $(VENV)/.installed
	$(PY) -m ane_kdma.waves --sim $(SIM) --out out/waves

lint: $(VENV)/.installed
	$(PYTEST) -q tb/test_lint.py
	$(VENV)/bin/ruff check python tests tb tools

# Deliberate one-line RTL bugs; every one must be caught (not part of CI).
mutants: $(VENV)/.installed
	$(PY) tools/mutants.py --sim $(SIM)

# Speed and memory figures, printed (not asserted).
bench: $(VENV)/.installed
	$(PY) tools/bench.py --sims verilator$(if $(shell command -v iverilog),$(comma)icarus)

formal: $(VENV)/.installed
	bash formal/run.sh

clean:
	rm -rf sim_build out formal/*/ .pytest_cache
