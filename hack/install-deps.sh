#!/usr/bin/env bash
# Installs what `make demo` and `make test` need and a fresh machine may lack.
# Quiet when everything is present; uses apt-get (as root) for Debian packages.
set -euo pipefail

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need go golang-go
need kubectl kubernetes-client
need openssl openssl
need curl curl
need git git
# promtool unit-tests the PrometheusRule (tests/alerts.rs).
need promtool prometheus
# `make image` builds the container image with buildah; tests/image.rs runs it with podman.
need buildah buildah
need podman podman
# musl-gcc compiles ring's C and assembly parts for the image's static musl binary.
need musl-gcc musl-tools

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: need root to apt-get install ${missing[*]}; install them and retry" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The harness's Go modules need the Go named in their go.mod (Debian's golang-go is older).
need_go=$(awk '$1 == "go" { print $2; exit }' "$(dirname "$0")/controlplane/go.mod")
have_go=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
if [ -n "$have_go" ] && [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -1)" != "$need_go" ]; then
  echo "error: Go $have_go is older than $need_go (hack/controlplane/go.mod); install Go >= $need_go" >&2
  echo "       (with Go >= 1.21 on PATH, 'export GOTOOLCHAIN=go$need_go' also works)" >&2
  exit 1
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "installing rust component $component" >&2
    rustup component add "$component" >/dev/null
  fi
done

# The container image's static binary (hack/image-context.sh). Without it `make test` says the
# image tests are skipped and why (hack/image.sh ci); the rest of the suite does not need it.
if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
  echo "installing rust target x86_64-unknown-linux-musl" >&2
  rustup target add x86_64-unknown-linux-musl >/dev/null ||
    echo "warning: could not add x86_64-unknown-linux-musl; the image tests will be skipped" >&2
fi

# `make lint` runs `cargo deny check licenses bans sources` (deny.toml). Built from crates.io
# once into ~/.cargo/bin (a few minutes); later runs find it there.
if ! cargo deny --version >/dev/null 2>&1; then
  echo "installing cargo-deny (cargo install --locked cargo-deny; takes a few minutes)" >&2
  cargo install --locked --quiet cargo-deny
fi
