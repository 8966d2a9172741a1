# mosc-guard: two commands do all the set-up on a fresh machine.
#   make demo   local control plane + registry + MCO simulator + mosc-guard, the report's scenario
#   make test   every test tier (unit, HTTPS, CLI, end-to-end on a real kube-apiserver,
#               the container image, the manifests on a real node)
#   make check  the fast tier for every change: fmt, clippy, unit tests and every test that
#               needs no API server
#   make soak   the reliability suite's long runs (property tests, alerts, load), RELIABILITY.md
# First run builds kube-apiserver, etcd and the registry (and for make test the node's kubelet,
# kube-proxy and kube-scheduler, and opm) from pinned Go modules into
# $${XDG_CACHE_HOME:-$$HOME/.cache}/mosc-guard/bin (a few minutes); later runs reuse them.

SHELL := /usr/bin/env bash
CARGO ?= cargo
GUARD ?= on
export GUARD

## Tools hack/install-deps.sh installs (cargo-deny) live in the mosc-guard cache, keyed by version
## and linked from TOOLS_BIN, which comes first on PATH for every recipe; so an empty
## XDG_CACHE_HOME (hack/fresh-check.sh) really installs them again. (`cargo deny` could find
## another cargo-deny first, in ~/.cargo/bin: lint runs `cargo-deny deny` from PATH.)
TOOLS_BIN := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mosc-guard/tools/bin
export PATH := $(TOOLS_BIN):$(PATH)

## The container image `make image` builds; its tag is the crate version, the same tag
## manifests/base/kustomization.yaml deploys (`images:`). Override: make image IMAGE=...
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
IMAGE ?= quay.io/mosc-guard/mosc-guard:$(VERSION)

.PHONY: all deps binaries build lint lint-code check test demo bench bench-cluster soak load stalled clean fresh-check

all: build

## Installs what a fresh machine lacks (Debian packages, Rust components, cargo-deny).
deps:
	@hack/install-deps.sh

## Every Go binary the tiers start, built once and cached by version.
binaries: deps
	@hack/build-binaries.sh >/dev/null

build: deps
	$(CARGO) build --workspace --all-targets --locked

## Also checks that every program the tiers start is installed by hack/install-deps.sh or is
## always there (hack/fresh-check.sh --deps-only).
lint-code:
	@hack/fresh-check.sh --deps-only --quiet
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

lint: deps lint-code
	cargo-deny deny --log-level error --locked check licenses bans sources

## Every test tier (hack/test.sh all): make lint, then the test binaries compiled once (`cargo
## test --workspace --no-run`) and every tier run from them: the cargo tier (unit tests and
## tests/*/, the test kit's own unit tests too; JOBS binaries at a time, THREADS test threads
## each), and beside it the image tier: image-test where this machine can build and run the
## image, else SKIPPED with the reason (hack/image.sh ci); then the node tier: the manifests'
## Deployment as pods on a real node (kubelet, containerd; needs root and the image), else
## SKIPPED with the reason (hack/node.sh ci). What only those two tiers and packaging's OLM test
## need (the image's release binary, opm, the node's Go binaries) builds from the start, beside
## lint, as do the control plane's Go binaries when they are not cached yet. Every tier runs; it ends with the time of each tier and of the ten slowest test
## binaries, and a line saying how each tier ended; the exit status is non-zero if any failed.
## (Benchmarks and the demo are compiled and linted by `lint`; `make bench`/`make demo` run them.)
JOBS ?= 2
THREADS ?= 2
export JOBS THREADS
test: deps
	@MAKE="$(MAKE)" CARGO=$(CARGO) hack/test.sh all

## The fast tier, for every change: lint-code, then the unit tests and every integration test
## that needs no API server (hack/test.sh fast: HTTPS, the CLIs on dumps, certs, the docs'
## links, alerts, dashboard, manifests' rendering). No Go binaries, no cargo-deny.
check:
	@hack/install-deps.sh check
	@$(MAKE) --no-print-directory lint-code
	@CARGO=$(CARGO) hack/test.sh fast

## The report's scenario, narrated. GUARD=defer plays it in defer mode, GUARD=off without mosc-guard
## (and then heals the pool with `mosc-guard recover`).
## Installs and builds only what the demo runs: the control plane and the registry (Go) while
## the guard and the demo (Rust) compile beside them.
demo:
	@hack/install-deps.sh demo
	@hack/build-binaries.sh control-plane >/dev/null & go_build=$$!; \
	rust_status=0; $(CARGO) build --locked --quiet --bin mosc-guard --example demo || rust_status=$$?; \
	wait $$go_build || exit 1; exit $$rust_status
	@$(CARGO) run --locked --quiet --example demo

## Criterion benchmarks: one decision at 5,000 and 50,000 nodes, one HTTPS round trip
## against a no-op webhook, and reading a dump of real nodes against hostile nesting (see
## BENCHMARKS.md).
bench: deps
	$(CARGO) bench --locked --bench decision
	$(CARGO) bench --locked --bench webhook
	$(CARGO) bench --locked --bench dump

## The cluster benchmark (BENCHMARKS.md): NODES realistic nodes on a real kube-apiserver with
## CHURN node status updates per node per hour, the release guard measured against an allow-all
## webhook (same binary and TLS code) and against no webhook. GUARD_ARGS adds `serve` flags.
NODES ?= 5000
CHURN ?= 12
bench-cluster: deps binaries
	$(CARGO) build --locked --release --bin mosc-guard --example bench_cluster
	NODES=$(NODES) CHURN=$(CHURN) MOSC_GUARD_BIN=$(CURDIR)/target/release/mosc-guard \
	  target/release/examples/bench_cluster

## The reliability suite's long runs (RELIABILITY.md), release profile: property tests at
## VERDICT_CASES verdict and DECODE_CASES decode cases, the alert rules, the race soak with
## TRIALS randomized trials (half deny, half defer mode; SOAK_SEED replays a run's choices),
## the chaos tests with a CHAOS_OUTAGE-second outage (the black-holed API server case
## included), then `make load`, then `make stalled`; ends with a summary (also when a part
## failed; the exit status says whether all passed). (`make test` runs short versions of the
## same tests.)
VERDICT_CASES ?= 100000
DECODE_CASES ?= 1000000
IMAGE_CASES ?= 100000
TRIALS ?= 1000
SOAK_SEED ?=
SOAK_CONCURRENCY ?= 4
CHAOS_OUTAGE ?= 30
SOAK_LOG ?= target/soak.log
soak: deps binaries
	@mkdir -p $(dir $(SOAK_LOG))
	@status=0; set -o pipefail; \
	echo "+ property tests and alerts (release), log: $(SOAK_LOG)"; \
	MOSC_GUARD_CASES_VERDICT=$(VERDICT_CASES) MOSC_GUARD_CASES_DECODE=$(DECODE_CASES) \
	  MOSC_GUARD_CASES_IMAGE=$(IMAGE_CASES) \
	  $(CARGO) test --workspace --locked --release --test reliability -- properties:: --nocapture --test-threads=1 \
	  2>&1 | tee $(SOAK_LOG) || status=1; \
	$(CARGO) test --workspace --locked --release --test packaging -- alerts:: --nocapture --test-threads=1 \
	  2>&1 | tee -a $(SOAK_LOG) || status=1; \
	echo "+ race soak, $(TRIALS) trials (release)"; \
	RUST_LOG=warn MOSC_GUARD_SOAK_TRIALS=$(TRIALS) MOSC_GUARD_SOAK_SEED=$(SOAK_SEED) \
	  MOSC_GUARD_SOAK_CONCURRENCY=$(SOAK_CONCURRENCY) \
	  $(CARGO) test --workspace --locked --release --test reliability -- soak:: --nocapture --test-threads=2 \
	  2>&1 | tee -a $(SOAK_LOG) || status=1; \
	echo "+ chaos, $(CHAOS_OUTAGE) s outages (release)"; \
	RUST_LOG=warn MOSC_GUARD_CHAOS_OUTAGE_SECS=$(CHAOS_OUTAGE) \
	  $(CARGO) test --workspace --locked --release --test reliability -- chaos:: --nocapture --test-threads=1 --include-ignored \
	  2>&1 | tee -a $(SOAK_LOG) || status=1; \
	echo "+ load (as make load)"; \
	$(LOAD_CMD) 2>&1 | tee -a $(SOAK_LOG) || status=1; \
	echo "+ stalled connections (as make stalled)"; \
	$(STALLED_CMD) 2>&1 | tee -a $(SOAK_LOG) || status=1; \
	echo "== soak summary ($(SOAK_LOG)) =="; \
	grep -E 'property [a-z_]+: |^  (decoded|blocked|false-denial reasons|denial reasons|failed requests|Deny|Allow|Malformed|guard RSS|rotations)|^soak [a-z]+: |^chaos [a-z-]+|^test [a-z_:]+ \.\.\. FAILED|^load: |^through the API server|^stalled: |^test result: ' $(SOAK_LOG); \
	exit $$status

## Load against a guard on a real API server (RELIABILITY.md): directly over HTTPS, LOAD_RATE
## requests/s for LOAD_SECONDS s with LOAD_ROTATIONS serving-certificate rotations; then dry-run
## deletions through kube-apiserver at each of LOAD_API_RATES for LOAD_API_SECONDS s, up to the
## first rate with an error or not sustained.
LOAD_RATE ?= 500
LOAD_SECONDS ?= 60
LOAD_ROTATIONS ?= 10
LOAD_NODES ?= 120
LOAD_API_RATES ?= 50,100,200,400,800
LOAD_API_SECONDS ?= 10
## (soak runs the same command; no $(MAKE) in its recipe, so `make -n soak` only prints.)
LOAD_CMD = MOSC_GUARD_LOAD_RATE=$(LOAD_RATE) MOSC_GUARD_LOAD_SECONDS=$(LOAD_SECONDS) \
	  MOSC_GUARD_LOAD_ROTATIONS=$(LOAD_ROTATIONS) MOSC_GUARD_LOAD_NODES=$(LOAD_NODES) \
	  MOSC_GUARD_LOAD_API_RATES=$(LOAD_API_RATES) MOSC_GUARD_LOAD_API_SECONDS=$(LOAD_API_SECONDS) \
	  $(CARGO) test --workspace --locked --release --test reliability -- load:: --nocapture --test-threads=1
load: deps binaries
	$(LOAD_CMD)

## Stalled connections against the real `mosc-guard serve` (release, `--from-dir` over an empty
## directory, default limits; RELIABILITY.md): STALLED connections that finish TLS and send
## nothing or only the HTTP/2 preface, first each connecting once (reviews for 5 s), then each
## reconnecting when closed (reviews for STALLED_SECONDS s); a real review over a new
## connection every 250 ms and a GET over an established HTTP/2 connection, which must never
## be closed; connecting once, every connection the server kept must then close by its 10 s
## deadline, leaving the guard no more open files than before the flood. Needs STALLED + 256
## open files (the test raises its soft limit to the hard one).
STALLED ?= 5000
STALLED_SECONDS ?= 20
STALLED_CMD = MOSC_GUARD_STALLED=$(STALLED) MOSC_GUARD_STALLED_SECONDS=$(STALLED_SECONDS) \
	  $(CARGO) test --workspace --locked --release --test serve -- https::connection_limits::floods::thousands_of_stalled_connections \
	  --nocapture --include-ignored --test-threads=1
stalled: deps
	$(STALLED_CMD)

## The container image. `make image` builds Containerfile.offline with no registry access: a
## static musl release binary (target x86_64-unknown-linux-musl) on BASE_IMAGE (default
## scratch) plus CA certificates and /etc/passwd with the non-root user 65532
## (hack/image-context.sh). `make image-upstream` builds the multi-stage Containerfile, which
## pulls BUILDER_IMAGE and BASE_IMAGE (distroless/static by default). Both take the first of
## buildah, podman or docker that works (ENGINE=... picks one) and tag $(IMAGE).
## `make image-test` checks its prerequisites (hack/image.sh can-test: buildah or podman,
## podman running a container with runc and the tests' options, the musl target), installing
## what hack/install-deps.sh can, then builds the offline image and runs it with podman
## (tests/image/main.rs): --version, check --from-dir, serve against a test control plane,
## SIGTERM's drain; then tests/packaging/plugin.rs's ignored test, the krew archive of the same static
## binary. `make test` runs it where the prerequisites hold, else says SKIPPED and why.
BASE_IMAGE ?=
BUILDER_IMAGE ?=
export IMAGE BASE_IMAGE BUILDER_IMAGE
.PHONY: image image-upstream image-test
image: deps
	@hack/image.sh build

image-upstream:
	@hack/image.sh upstream

image-test: deps binaries
	@CARGO=$(CARGO) hack/image.sh test

## The node tier alone: `kubectl apply -k` of the shipped overlays on a control plane with a
## real node (kubelet and kube-proxy from the pinned Kubernetes module, Debian's containerd,
## runc and CNI bridge), the guard as the Deployment's pods from $(IMAGE) (built first), the
## report's scenario and an admin's first-hour operations against them (tests/node/). Needs
## root; one node per machine at a time (the tests wait for its lock).
.PHONY: node-test
node-test: deps binaries
	@CARGO=$(CARGO) hack/node.sh test

## `oc mosc-guard` / `kubectl mosc-guard`: installs the release binary as kubectl-mosc_guard
## (the plugin file name for `mosc-guard`; oc and kubectl run it) into $(PREFIX)/bin, and as
## mosc-guard beside it. PLUGIN_BIN=path installs that binary instead of building one. The krew
## manifest is plugins/mosc-guard.yaml (hack/plugin-archive.sh makes its release archive).
PREFIX ?= /usr/local
PLUGIN_BIN ?= target/release/mosc-guard
.PHONY: install-plugin uninstall-plugin plugin-archive
install-plugin:
	@if [ "$(PLUGIN_BIN)" = target/release/mosc-guard ]; then \
	  $(CARGO) build --locked --release --bin mosc-guard; fi
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$(PLUGIN_BIN)" "$(DESTDIR)$(PREFIX)/bin/mosc-guard"
	install -m 0755 "$(PLUGIN_BIN)" "$(DESTDIR)$(PREFIX)/bin/kubectl-mosc_guard"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/kubectl-mosc_guard: 'oc mosc-guard check --all' or 'kubectl mosc-guard check --all' runs it"

## The krew release archive (static musl binary) and its manifest with the archive's sha256,
## into target/plugin/.
plugin-archive: deps
	@hack/plugin-archive.sh

## The OLM bundle image (bundle/bundle.Containerfile, FROM scratch: no registry access).
BUNDLE_IMAGE ?= quay.io/mosc-guard/mosc-guard-bundle:v$(VERSION)
.PHONY: bundle-image
bundle-image:
	@IMAGE=$(BUNDLE_IMAGE) hack/image.sh bundle

uninstall-plugin:
	rm -f "$(DESTDIR)$(PREFIX)/bin/kubectl-mosc_guard" "$(DESTDIR)$(PREFIX)/bin/mosc-guard"

## hack/fresh-check.sh: the README's two commands from a fresh clone of HEAD with empty caches
## (make demo's and make test's cold times together), timed; see docs/development.md.
fresh-check:
	@hack/fresh-check.sh

clean:
	$(CARGO) clean
