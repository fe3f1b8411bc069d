# plumb: `make demo` shows it working, `make test` checks everything. See README.md.
SHELL := bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: help install controlplane lint unit test demo run cluster-up cluster-down clean
.PHONY: bench bench-quick metrics-plot image test-e2e test-long test-chaos jaeger test-tracing

help:
	@echo "make demo          set up, start a local control plane, show plumb scheduling pods"
	@echo "make test          lint, then the whole suite (builds the control plane if needed)"
	@echo "make run           like demo, but keep plumb in the foreground (Ctrl-C stops)"
	@echo "make lint          ruff, mypy --strict, import-linter layer contracts"
	@echo "make unit          the unit tests and the tools' tests (no control plane)"
	@echo "make cluster-up    start the local cluster (NODE=1: with a real node); cluster-down stops it"
	@echo "                   (KUBE_VERSION=v1.37.2 on any target: another Kubernetes release, see hack/k8s/)"
	@echo "make bench         plumb beside kube-scheduler, all workloads (5,000 and 15,000 nodes too); writes docs/benchmarks.md (~30 min)"
	@echo "make bench-quick   the same, small: a smoke check (every pod placed, no violations)"
	@echo "make metrics-plot  a short real run scraped every second; writes docs/observability/metrics.png (~1 min)"
	@echo "make image         plumb's image from the Dockerfile, with buildah, no network (loaded into a running real node)"
	@echo "make test-e2e      make image, then kubectl apply -k manifests/ on a local cluster with a real node (root)"
	@echo "make test-chaos    the fault scenarios full size (SIGKILLs, restarts, 410s, API faults, churn, fuzz,"
	@echo "                   a 3-minute soak; SOAK=1800 for 30); writes docs/reliability.md (~15 min)"
	@echo "make test-long     the longer side-by-side suites (every preemption scenario under both schedulers), then"
	@echo "                   every side-by-side suite against the oldest release plumb follows (v1.34.4)"
	@echo "make test-tracing  the tests marked tracing, on a cluster with Jaeger (built first: make jaeger, once, minutes)"
	@echo "make jaeger        build Jaeger v1.75.0 from its Go module for plumb cluster up --tracing (cached)"

# plumb with its test and lint tools, and the development tooling beside it (tools/: plumb_dev,
# the local cluster, the benchmark, the demo, the test helpers), which the image never gets.
# The example Python plugins (examples/) go beside plumb as a user installs a plugin: `plumb
# plugins` lists them and the tests enable them by name.
EXAMPLES := examples/plumb-maintenance-window examples/plumb-accelerator-packing
$(INSTALLED): pyproject.toml tools/pyproject.toml $(EXAMPLES:%=%/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]' -e tools/ $(EXAMPLES:%=-e %)
	@# Bytecode, as an installed wheel has it: every `plumb run` a test spawns starts faster.
	$(BIN)/python -m compileall -q operator/plumb >/dev/null
	@touch $@

install: $(INSTALLED)

# The Kubernetes release the local cluster builds and runs: hack/versions.env's, or another
# that hack/k8s/ holds with KUBE_VERSION=v1.N.x (make controlplane KUBE_VERSION=v1.37.2, or
# make demo/test/... KUBE_VERSION=...: the tests, the demo and the benchmark read it from
# PLUMB_KUBE_VERSION).
ifneq ($(KUBE_VERSION),)
export PLUMB_KUBE_VERSION := $(KUBE_VERSION)
endif

# Builds etcd and the Kubernetes commands (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kubelet, kube-proxy) from Go modules once per release, and
# scheduler-plugins' kube-scheduler (Coscheduling, for the gang tests) once, cached in
# ~/.cache/plumb (PLUMB_CACHE_DIR); later runs reuse them.
controlplane:
	@bash hack/build-control-plane.sh >/dev/null
	@bash hack/build-scheduler-plugins.sh >/dev/null

# Jaeger (v1.75.0's `jaeger` command, Jaeger v2) for `plumb cluster up --tracing`, built from its
# Go module once and cached in ~/.cache/plumb (PLUMB_CACHE_DIR). A long first build (the OTel
# Collector and every storage backend): no other target needs it but test-tracing.
jaeger:
	@bash hack/build-jaeger.sh >/dev/null

lint: install
	$(BIN)/ruff check operator tools tests examples
	$(BIN)/ruff format --check operator tools tests examples
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: install
	$(BIN)/pytest tests/unit tests/tools tests/chaos/test_faultproxy.py tests/chaos/test_invariant_devices.py tests/chaos/test_invariant_quotas.py -q

# Neither the long suites nor the tracing tests (they need Jaeger: make test-tracing).
test: lint controlplane
	$(BIN)/pytest -q -m "not long and not tracing" --durations=25

# The tests that read kube-apiserver's and etcd's spans from Jaeger, on a cluster started with
# tracing (plumb cluster up --tracing's); make test and make test-long leave them out.
test-tracing: install controlplane jaeger
	$(BIN)/pytest -q -m tracing

# The short version of each scenario runs in make test; this one runs them full size and writes
# their figures and the soak plot into docs/reliability.md.
test-chaos: install controlplane
	rm -rf build/chaos
	PLUMB_CHAOS=full $(if $(SOAK),PLUMB_SOAK_SECONDS=$(SOAK)) $(BIN)/pytest -q tests/chaos
	$(BIN)/python -m tests.chaos.reliabilityreport --command "make test-chaos$(if $(SOAK), SOAK=$(SOAK))"

# The longer suites, then every side-by-side (differential) suite again against the oldest
# release plumb follows (hack/versions.env's OLDEST_KUBE_VERSION; make test runs them against the
# newest), so that both ends of the window are checked.
OLDEST_KUBE_VERSION := $(shell sed -n 's/^OLDEST_KUBE_VERSION=//p' hack/versions.env)

test-long: install controlplane
	$(BIN)/pytest -q -m long
	@bash hack/build-control-plane.sh $(OLDEST_KUBE_VERSION) >/dev/null
	PLUMB_KUBE_VERSION=$(OLDEST_KUBE_VERSION) $(BIN)/pytest -q -m differential

demo: install controlplane
	$(BIN)/plumb demo $(if $(NODE),--node)

run: install controlplane
	$(BIN)/plumb demo --keep-running

cluster-up: install controlplane
	$(BIN)/plumb cluster up $(if $(NODE),--node)

cluster-down: install
	$(BIN)/plumb cluster down

bench: install controlplane
	$(BIN)/plumb bench --large --xlarge --out docs

bench-quick: install controlplane
	$(BIN)/plumb bench --quick --out $(or $(BENCH_OUT),build/bench-quick)

# A short real run with plumb's metrics port on, drawn as the dashboard's main panels.
metrics-plot: install controlplane
	$(BIN)/python -m plumb_dev.bench.metricsplot --out docs/observability/metrics.png

# plumb's image: wheels staged from PyPI (pip's cache) and built on a Debian Python base with no
# network (hack/image/build.sh); prints the reference. `docker build .` builds the same Dockerfile.
image: install
	@bash hack/image/build.sh

# The install as a user does it, on a cluster with a real node: skipped, saying why, where this
# machine cannot run one. Builds the image itself (make image) first.
test-e2e: install controlplane
	PLUMB_E2E=1 $(BIN)/pytest tests/e2e -q -rsP

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build *.egg-info \
		tools/*.egg-info tools/build
