# The two commands a newcomer needs: `make lab` and `make test`. Each sets itself up.
# bash, for `time`: each stage of `make test` prints its wall and CPU time.
SHELL := bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Every Python started here caches the bytecode of what it imports (__pycache__, gitignored), as Python
# does by default; where the environment turns that off (PYTHONDONTWRITEBYTECODE=1, as on CI's
# machines), each of the ~700 interpreters of `make test` compiled helpers/ again (0.06-0.1 CPU-s)
# and each pytest process every test file (2 CPU-s of its 12.5 to collect).
unexport PYTHONDONTWRITEBYTECODE
# The lock: the exact set CI passes with (`make lock` refreshes it). The default torch is its pin for
# this Python (helpers.environment.TESTED_TORCH, or an older one where this Python is too old for it).
LOCK := requirements/constraints.txt
ifeq ($(origin TORCH_VERSION),undefined)
TORCH_VERSION := $(shell $(PYTHON) tools/install_torch.py --locked-version)
endif
# Which build (tools/install_torch.py): auto = the CPU build from PyTorch's CPU-only index on Linux
# without an NVIDIA GPU, else the default build; cpu; cuda (the default build, CUDA on Linux).
TORCH_BUILD ?= auto
# One stamp per torch version and build: `make test TORCH_VERSION=2.11.0` installs that version into
# .venv and runs the suite on it; the next plain `make test` puts the locked one back.
STAMP := $(VENV)/.installed-torch-$(TORCH_VERSION)-$(TORCH_BUILD)
# Per-cell limit for nbmake: a stuck cell fails the run instead of hanging it. Above the notebooks'
# own 120 s deadlines, so under load their deadline fires first and kills its processes cleanly.
CELL_TIMEOUT ?= 180

.PHONY: setup lab test lint unit notebooks e2e site site-deps test-site clean test-spawn test-forkserver unit-spawn unit-forkserver docs api-docs \
	test-cluster test-wheel lock

setup: $(STAMP)

# Reinstalls only when pyproject.toml, the lock, the install script or the JupyterLab settings change.
# tools/install_torch.py installs torch (the build TORCH_BUILD picks; where PyTorch's CPU-only index
# cannot be reached, what the configured indexes offer, said in one line), then the project and its
# dev tools within the lock. The venv's JupyterLab default settings go to its etc/jupyter, its kernels'
# IPython configuration to its etc/ipython (docs/install.md: "JupyterLab setting", "Kernels exit").
LAB_OVERRIDES := jupyter-config/labconfig/default_setting_overrides.json
KERNEL_CONFIG := jupyter-config/ipython/ipython_kernel_config.json
$(STAMP): pyproject.toml $(LOCK) tools/install_torch.py $(LAB_OVERRIDES) $(KERNEL_CONFIG)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) tools/install_torch.py --version $(TORCH_VERSION) --build $(TORCH_BUILD)
	install -D -m 644 $(LAB_OVERRIDES) $(VENV)/etc/jupyter/labconfig/default_setting_overrides.json
	install -D -m 644 $(KERNEL_CONFIG) $(VENV)/etc/ipython/ipython_kernel_config.json
	rm -f $(VENV)/.installed-torch-*
	touch $(STAMP)

# Listens on 127.0.0.1 only, with a random token (in the URL it prints). Jupyter refuses to run as
# root (containers, cloud shells) unless told; we tell it only there.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	cd notebooks && ../$(PY) -m jupyterlab --ServerApp.ip=127.0.0.1 --no-browser $(ALLOW_ROOT)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Unit tests, the docstring examples in helpers/, and every notebook run in JupyterLab in headless
# Chromium (tests/e2e, marker `browser`: Run All, every cell executed, no error output; the kernel is
# the venv's, the one nbmake would start), in WORKERS pytest-xdist workers: twice as many as CPUs, at
# most 8 (most tests wait on child processes and kernels); it saves each executed notebook for the
# site. nbmake runs every notebook again on the macOS path in `make test-wheel` (and all of them in
# `make notebooks`), the ones that read the default in `make test-forkserver`. Each test module and helpers
# module goes to one worker as a whole (--dist loadscope), in collection order (--no-loadscope-reorder),
# the longest first (conftest.LONG_FIRST): the browser test's two halves (two modules, one JupyterLab
# each), the other modules that hold a worker a minute or more, then the rest. No test asserts a
# bound on a measured time that a neighbour could decide.
# Each session checks for leftover child processes and /dev/shm entries (conftest.py); the
# repository and /dev/shm must be as clean afterwards as before, and the run's own temporary
# directory empty. Each stage prints its wall and CPU time (bash's `time`: user + system, the
# processes it waited for included; on 2 cores the suite is CPU-bound, so CPU time is the figure
# that grows with the suite).
WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(8, 2 * (os.cpu_count() or 1)))")
LOADSCOPE := --dist loadscope --no-loadscope-reorder
XDIST := -n $(WORKERS) $(LOADSCOPE)
NBMAKE := --nbmake --nbmake-timeout=$(CELL_TIMEOUT)
SUITE := tests/e2e tests helpers --doctest-modules
TIMED = TIMEFORMAT="$(1): %0R s wall, %0U + %0S s CPU"; time
# The pytest stages run with a temporary directory of their own, which must be empty afterwards
# (caches aside: tools/clean_check.py); any other entry fails the run.
CLEAN := $(VENV)/clean-check
# A test that failed because one of its own deadlines expired (a queue's get, a subprocess's limit, a
# pattern still running) runs once more; the summary counts it as a rerun. On 2 cores, 4 xdist
# workers starting spawn interpreters pushed a different 60 s wait past its limit in each of the
# last three CI runs. Any other failure fails at once, a real hang fails twice. pytest-timeout's own
# limit is not rerun: pytest-rerunfailures 16.7 reruns a test without it (docs/testing.md). A gloo
# group whose rank failed to connect because a peer had already left (`connectFullMesh failed ...
# Connection closed by peer`: the catalog's gloo_peer_left_during_init; the sites seen are fixed) runs once more.
RERUN := --reruns 1 --only-rerun '^(Empty|TimeoutExpired): ' --only-rerun 'still running after' \
	--only-rerun 'connectFullMesh failed with .* Connection closed by peer'
RUN_TMP := TMPDIR=$(CURDIR)/$(CLEAN)/tmp
# The browser run keeps each notebook as JupyterLab saved it after Run All: `make site` shows those.
EXECUTED := $(CURDIR)/build/executed

test:
	@$(call TIMED,install) $(MAKE) --no-print-directory setup
	@$(call TIMED,lint) $(MAKE) --no-print-directory lint
	@$(PY) -m tools.size_report
	@$(PY) tools/clean_check.py save $(CLEAN)
	@$(call TIMED,pytest on $(WORKERS) workers) $(RUN_TMP) EXECUTED_NOTEBOOKS=$(EXECUTED) $(PY) -m pytest $(SUITE) $(XDIST) $(RERUN) --durations=25
	@$(PY) tools/clean_check.py compare $(CLEAN)

unit: $(STAMP)
	$(PY) -m pytest tests helpers --doctest-modules -m "not browser and not wheel and not site and not spawn_variant" $(XDIST)

# Only the browser test: every notebook run through JupyterLab's UI in Debian's Chromium
# (`apt-get install chromium`; .ci/run installs it). Screenshots land in a temp dir it prints.
e2e: $(STAMP)
	$(PY) -m pytest tests/e2e -m browser

notebooks: $(STAMP)
	$(PY) -m pytest notebooks --nbmake --nbmake-timeout=$(CELL_TIMEOUT) $(XDIST)

# The documentation site, into _site/ (gitignored): Sphinx + myst-nb (site/conf.py), sources staged in
# build/site-src by tools/site.py: the notebooks executed with their outputs, the error index, the
# patterns, the API page, search, Mermaid drawn from the copy `npm ci` installs in site/ (no network).
# Execution goes through a jupyter-cache (build/jupyter-cache) that tools/site.py first seeds from the
# notebooks the browser run of `make test` saved (build/executed): after it, nothing is executed
# again. Warnings, a broken link to a section among them, fail the build.
site: $(STAMP) site/node_modules/.package-lock.json
	@$(call TIMED,site) CELL_TIMEOUT=$(CELL_TIMEOUT) $(PY) -m tools.site --out _site --executed $(EXECUTED)

# The site's npm packages alone (.ci/run installs them while `make setup` runs).
site-deps: site/node_modules/.package-lock.json

site/node_modules/.package-lock.json: site/package.json site/package-lock.json
	cd site && npm ci --no-audit --no-fund --ignore-scripts

# The built site in headless Chromium, served on 127.0.0.1, every other request refused
# (tests/e2e/test_site.py, marker `site`, deselected elsewhere); run after `make site`.
test-site: $(STAMP)
	@$(call TIMED,site browser test) $(PY) -m pytest tests/e2e/test_site.py -m site -p no:cacheprovider
# Portability: the default start method forced, as on macOS/Windows (spawn) and Linux with Python
# 3.14+ (forkserver), for what reads it. The rule `names-start-method` keeps every other start site
# explicit, so a forced default changes only the tests marked `default_start_method` (run in a test
# process that conftest.py gives the default MP_DEFAULT_START_METHOD names) and the notebooks whose
# cells read the default (`python -m tests.notebook_rules --reads-default`), run in a kernel of the
# kernelspec jupyter-config/kernels/python3-$* (its exec_lines set the default; JUPYTER_PATH finds it).
# Under spawn those notebooks already ran in `make test-wheel`, every notebook on the macOS path, so
# `make test-spawn` runs the marked tests, and the unit tests' spawn variants (marker `spawn_variant`:
# a `method` parameter of spawn where FAST_METHOD is not; `make test` leaves them to this stage), less
# those marked `spawn_in_notebook`, whose notebook runs the same workers under spawn in `make
# test-wheel` and asserts the same outcomes. Both stages import only the test files that can hold
# such tests (--forced-files-only, conftest.py).
# `make unit-spawn` / `unit-forkserver` run every unit test with the default forced.
FORCED = MP_DEFAULT_START_METHOD=$* JUPYTER_PATH=$(CURDIR)/jupyter-config $(RUN_TMP)
# They run few tests (39 and 15 on Linux): one worker per CPU, not two. A worker's start (torch,
# conftest.py, collection) costs 10-15 CPU-s; on 2 cores, 2 workers against 4 (2026-12-03): spawn 66 s
# and 100 CPU-s against 70 s and 123, forkserver 52 s and 56 against 53 s and 87.
FORCED_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(8, os.cpu_count() or 1))")
READS_DEFAULT = $(shell $(PY) -m tests.notebook_rules --reads-default)
FORCED_NOTEBOOKS_spawn :=
FORCED_NOTEBOOKS_forkserver = $(READS_DEFAULT)
FORCED_MARKS_spawn := or (spawn_variant and not spawn_in_notebook)
FORCED_MARKS_forkserver :=
test-spawn test-forkserver: test-%: $(STAMP)
	@$(PY) tools/clean_check.py save $(CLEAN)
	@$(call TIMED,pytest $* on $(FORCED_WORKERS) workers) $(FORCED) $(PY) -m pytest $(FORCED_NOTEBOOKS_$*) tests \
		$(NBMAKE) --nbmake-kernel=python3-$* -n $(FORCED_WORKERS) $(LOADSCOPE) \
		$(RERUN) --forced-files-only \
		-m "notebook or default_start_method $(FORCED_MARKS_$*)"
	@$(PY) tools/clean_check.py compare $(CLEAN)

unit-spawn unit-forkserver: unit-%: $(STAMP)
	MP_DEFAULT_START_METHOD=$* $(PY) -m pytest tests helpers --doctest-modules -m "not browser and not wheel and not site" $(XDIST)

# Notebook 09's Ray Train run (scripts/train_ray.py): the optional `cluster` extra (Ray, large, so
# not part of `make setup`) and its test, bounded by the test's own timeout.
test-cluster: $(STAMP)
	$(PY) -m pip install --quiet -e '.[cluster]'
	$(PY) -m pytest tests/test_cluster_ray.py

# The series installed like a library (tests/test_wheel.py, marker `wheel`, deselected elsewhere): a wheel
# built from a copy of the checkout, installed into a fresh venv in a temporary directory outside the
# repository (torch and the other dependencies borrowed from .venv, the project itself not), every
# notebook run under nbmake from an empty folder on the macOS path (spawn default, HELPERS_PLATFORM=darwin),
# an exercise checked there, and the setup cell's Colab/Kaggle install from a local git repository.
# Its temporary directory is the system's, never the repository's. WHEEL_TEST_NOTEBOOKS=01,06 runs
# only those notebooks (while iterating).
test-wheel: $(STAMP)
	@$(call TIMED,wheel) $(PY) -m pytest tests/test_wheel.py -m wheel -p no:cacheprovider --durations=5

# Refreshes the lock from the package index: the newest versions pyproject.toml allows, for every
# Python from the oldest tested one (helpers.environment.TESTED_PYTHONS; tests/test_project.py keeps
# --python-version equal) and every platform (markers where they differ), with uv (installed into .venv).
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --universal --python-version 3.10 --upgrade \
		--custom-compile-command "make lock" --quiet -o $(LOCK)

# Regenerates what is generated: docs/API.md (from the helpers modules), docs/errors.md, and README.md's
# and docs/install.md's marked blocks (the notebook table from the notebooks' headers, the tested
# versions from helpers/environment.py); tests/test_api_reference.py fails when one is stale.
# api-docs is its older name.
docs api-docs: $(STAMP)
	$(PY) -m tools.gen_docs

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache _site build site/node_modules
