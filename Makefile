# openum: the two set-up commands are `make run` (the main job) and `make test` (all tests).
# Both create .venv when it is missing and install what the project needs.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP_CORE := $(VENV)/.installed-core
STAMP_ALL  := $(VENV)/.installed-all
PYTEST_ARGS ?=
# The hot-path modules setup.py compiles with mypyc (COMPILED_MODULES in src/openum/_accel.py): when one of
# them (or the list) changes, the install is redone so the compiled modules match their source.
COMPILED_SRC := $(shell sed -n 's/^    "\(openum[._a-z0-9]*\)",$$/\1/p' src/openum/_accel.py | tr . / | sed 's|^|src/|; s|$$|.py|')

.PHONY: run test pytest fuzz lint typecheck unit system-deps docs clean help

help:
	@echo "make run    - the main demo: simulated market data -> Spark analytics pipeline -> subscriber (about 70 s)"
	@echo "make test   - lint, type-check and run every test (installs what is missing)"
	@echo "make lint   - ruff and mypy only"
	@echo "make fuzz   - fuzz the receive paths: 10^6 mutated inputs per target (FUZZ_INPUTS=N), hours"
	@echo "make docs   - regenerate docs/configuration.md from the option registry"

$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "openum needs Python >= 3.11, this is " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# pip compiles the hot paths (setup.py, mypyc) when a C compiler and the Python headers are there, and
# installs openum as pure Python otherwise; the last line says which.  $(call install,TARGET)
ALL_EXTRAS := .[dev,compression,spark]
define install
	@PYTHON=$(PY) ./scripts/system-deps.sh compiler || true
	$(PY) -m pip install -q -e '$(1)'
	@$(PY) -c 'import openum._accel as a; print("openum:", a.REASON)'
endef

$(STAMP_CORE): pyproject.toml setup.py src/openum/_accel.py $(COMPILED_SRC) | $(VENV)/bin/python
	$(call install,.)
	@touch $@

$(STAMP_ALL): pyproject.toml setup.py src/openum/_accel.py $(COMPILED_SRC) | $(VENV)/bin/python
	$(call install,$(ALL_EXTRAS))
	@touch $@ $(STAMP_CORE)

system-deps:
	@./scripts/system-deps.sh

# The Spark demo (openum demo --spark): publisher -> Spark analytics pipeline -> analytics subscriber.
# PySpark comes with openum[spark]; without PySpark or Java the demo says why and runs without Spark.
run: $(STAMP_CORE)
	@./scripts/system-deps.sh java || echo "make run: without Java 17 the demo runs without Spark" >&2
	@$(PY) -c 'import pyspark' 2>/dev/null || $(PY) -m pip install -q -e '.[spark]' || \
		echo "make run: could not install openum[spark] (PySpark); the demo will run without Spark" >&2
	$(VENV)/bin/openum demo --spark

lint: $(STAMP_ALL)
	$(VENV)/bin/ruff check src tests bench setup.py
	$(VENV)/bin/ruff format --check src tests bench setup.py
	$(VENV)/bin/mypy

docs: $(STAMP_CORE)
	$(VENV)/bin/openum config options --format markdown > docs/configuration.md

# Every test runs twice (PRACTICES 14): on the compiled hot paths, then on the pure-Python ones
# (OPENUM_PURE_PYTHON=1); once where they cannot be compiled (no C compiler or Python headers) or
# OPENUM_PURE_PYTHON is set.  A build that fell back to pure Python although it could compile is an
# error, not a quiet single run.  pytest exits 5 when it collected nothing: a broken run, never a pass.
CAN_COMPILE := import os, shutil, sys, sysconfig; cc = (sysconfig.get_config_var("CC") or "cc").split()[0]; \
	sys.exit(0 if shutil.which(cc) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
test: system-deps lint
	@compiled=$$($(PY) -c 'import openum; print(int(openum.COMPILED))') || exit 1; \
	if [ "$$compiled" = 1 ]; then \
		echo "make test: 1/2: the compiled hot paths"; \
		$(MAKE) --no-print-directory pytest || exit $$?; \
		echo "make test: 2/2: the pure-Python hot paths (OPENUM_PURE_PYTHON=1)"; \
		OPENUM_PURE_PYTHON=1 $(MAKE) --no-print-directory pytest; \
	elif [ -z "$${OPENUM_PURE_PYTHON:-}" ] && $(PY) -c '$(CAN_COMPILE)'; then \
		echo "make test: a C compiler and the Python headers are here, but the hot paths are not compiled" \
			"($$($(PY) -c 'import openum._accel as a; print(a.REASON)')); see the build output of" \
			"'$(PY) -m pip install -v -e .', or set OPENUM_PURE_PYTHON=1 to test pure Python only" >&2; \
		exit 1; \
	else \
		echo "make test: the hot paths are not compiled here; one run, pure Python"; \
		$(MAKE) --no-print-directory pytest; \
	fi

pytest:
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - treating this as a failure" >&2; exit 1; fi; \
	exit $$rc

# The long fuzz pass over the receive paths (docs/testing.md): 10^6 inputs per target by default, hours
# of CPU; reproducers of any finding go to fuzz-findings/.  FUZZ_INPUTS=10000 for a quick look.
FUZZ_INPUTS ?= 1000000
FUZZ_ARGS ?=
fuzz:
	$(PY) -m openum.testing.fuzz --inputs $(FUZZ_INPUTS) --out fuzz-findings $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist src/*.egg-info
	find src -name '*.so' -delete
