# ProxShift — the two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
# Tools from the project venv (ansible-playbook, cargo-zigbuild, zig via ziglang) come first.
export PATH := $(CURDIR)/$(VENV)/bin:$(HOME)/.cargo/bin:$(PATH)
export PROXSHIFT_VENV := $(CURDIR)/$(VENV)

# Cargo's build folder is a machine cache like the Kubernetes build (scripts/deps/kube.sh): a fresh clone
# (every CI run) reuses the compiled dependencies and recompiles only the workspace. Shared by every
# checkout on the machine (cargo locks it); scripts/deps/cargo-target.sh empties it when it grows too large.
# CARGO_TARGET_DIR from the environment wins; without a writable /var/cache/proxshift, ./target.
PROXSHIFT_CACHE ?= /var/cache/proxshift
ifeq ($(origin CARGO_TARGET_DIR),undefined)
CARGO_TARGET_DIR := $(shell mkdir -p $(PROXSHIFT_CACHE)/cargo-target 2>/dev/null && [ -w $(PROXSHIFT_CACHE)/cargo-target ] \
  && echo $(PROXSHIFT_CACHE)/cargo-target || echo $(CURDIR)/target)
endif
export CARGO_TARGET_DIR
# Incremental artefacts only help an edit-compile loop; in the shared folder they are gigabytes per checkout.
export CARGO_INCREMENTAL ?= 0

.PHONY: all venv build collections release test test-deps fmt-check clippy cargo-test ansible-test ansible-lint demo bench fuzz fuzz-short clean-collections

all: build

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

## build: portable, size-optimised release binaries (glibc 2.17), copied into the collections.
build: venv
	scripts/build.sh

## collections: Galaxy tarballs of the three collections, binaries included, in build/ (for an EE or a hub).
collections: build
	@for c in proxmox hashi_vault openshift; do \
	  $(VENV)/bin/ansible-galaxy collection build --force --output-path build ansible_collections/proxshift/$$c || exit 1; \
	done

## release: one collection's release, `make release COLLECTION=proxmox VERSION=1.1.0` (scripts/release.sh: version,
## changelog from the fragments with antsibull-changelog, the EE's tarball name, the tarball in build/).
release: build
	scripts/release.sh $(COLLECTION) $(VERSION)

## test-deps: everything the tests need that is not a Rust crate (services, tools); idempotent and cached.
test-deps: venv
	@for s in scripts/deps/*.sh; do [ -e "$$s" ] || continue; echo "== $$s"; bash "$$s" || exit 1; done

fmt-check:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

# The pvesim-backed module suites (each crate's `tests/sim.rs` or `tests/pvesim.rs`) play the newest PVE
# in the workspace run, then run once more against a PVE 8 release (`pvesim::lab::release_under_test`).
PVE8_RELEASE ?= 8.4.1
cargo-test:
	cargo test --workspace
	PVESIM_PVE_VERSION=$(PVE8_RELEASE) cargo test --workspace --test sim --test pvesim

# Three worker processes (pytest-xdist) on the two cores: one file's run keeps about 0.6 of a core busy (measured: a
# flow file alone, 32% of two cores), since most of a flow test's time is ansible-playbook and the services waiting
# on each other; three keep both cores busy. Whole files per worker, so module-scoped services start once.
# Files go longest first (tests/file_durations.py orders them by tests/durations.json; xdist must not
# reorder them); --durations lists the slowest tests in every run, so the time budget stays visible.
PYTEST_WORKERS ?= 3
ansible-test: build
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 tests

# ansible-lint resolves every module a role or playbook names, so the binaries must be in the
# collections first (they are build output, absent from a clean checkout).
ansible-lint: build
	scripts/lint.sh

## test: every test — formatting and lints first, then Rust tests, short fuzzing, and last the real
## ansible-playbook integration tests (pytest; its summary closes the output).
test: test-deps fmt-check clippy ansible-lint cargo-test fuzz-short ansible-test

## fuzz-short: every cargo-fuzz target (fuzz/) for FUZZ_SECONDS each; `make fuzz` runs them longer.
FUZZ_SECONDS ?= 15
fuzz-short:
	scripts/fuzz.sh $(FUZZ_SECONDS)

fuzz:
	scripts/fuzz.sh $(or $(FUZZ_LONG_SECONDS),600)

## demo: the main job on the simulator.
demo: build
	scripts/demo.sh

## bench: one Markdown table of speed and footprint figures against pvesim (not part of `make test`).
bench: build
	scripts/bench.sh
