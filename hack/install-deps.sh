#!/usr/bin/env bash
# Installs what `make demo` and `make test` need and a fresh machine may lack: Debian packages
# (apt-get, as root), Rust components and the musl target (rustup), and the tools (cargo-deny,
# by hack/install-tool.sh) into the mosc-guard cache. Quiet when everything is present.
#
#   hack/install-deps.sh demo    only what `make demo` runs: Go, kubectl, git
#   hack/install-deps.sh check   and what `make check` runs: rustfmt, clippy, promtool
#   hack/install-deps.sh [test]  everything every tier of `make test` needs (the default)
#
# Every program a tier starts is named by a `need` line here, or is in the allow-list of
# hack/fresh-check.sh with the reason it is always there; `make lint` checks that
# (`hack/fresh-check.sh --deps-only`), so a test that starts a new program fails CI until its
# package is named here.
#
# Tools: ${XDG_CACHE_HOME:-$HOME/.cache}/mosc-guard/tools/<name>-<version>, linked from
# tools/bin, which the Makefile puts first on PATH (and a fresh cache installs them again).
set -euo pipefail

scope="${1:-test}"
case "$scope" in
  demo | check | test) ;;
  *) echo "usage: $0 [demo|check|test]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="${XDG_CACHE_HOME:-${HOME:?set HOME or XDG_CACHE_HOME}/.cache}/mosc-guard/tools"

missing=()       # Debian packages every tier needs
missing_image=() # Debian packages only the image and node tiers need (they skip without them)
# need COMMAND-OR-FILE DEBIAN-PACKAGE [image|node]: PACKAGE provides the program COMMAND (or the
# file at an absolute path); `image` marks what only the container image's tier uses, `node`
# what only the node tier uses (hack/node.sh: a real node running the manifests' Deployment).
need() {
  if [[ "$1" == /* ]]; then [[ -e "$1" ]] && return 0; else command -v "$1" >/dev/null 2>&1 && return 0; fi
  if [[ "${3:-}" == image || "${3:-}" == node ]]; then missing_image+=("$2"); else missing+=("$2"); fi
}

# The harness's Go modules (hack/build-binaries.sh); Debian 12's golang-go is too old, see below.
need go golang-go
# The tests drive the API server as an admin would (testkit/src/kubectl.rs, tests/packaging/plugin.rs).
need kubectl kubernetes-client
# Go fetches the modules the proxy does not serve with git; hack/fresh-check.sh clones with it.
need git git
if [[ "$scope" != demo ]]; then
# promtool unit-tests the PrometheusRule (tests/packaging/alerts.rs).
need promtool prometheus
# hack/test.sh stops the builds it started beside lint when lint fails.
need pgrep procps
fi
if [[ "$scope" == test ]]; then
# `make image` builds the container image with buildah; tests/image/main.rs runs it with podman and
# `--runtime runc` (Debian 12's podman brings crun, which fails where cgroups are in hybrid mode).
need buildah buildah image
need podman podman image
need runc runc image
# musl-gcc compiles ring's C and assembly parts for the image's static musl binary;
# hack/image-context.sh checks it is static (readelf), strips it and adds the CA bundle.
need musl-gcc musl-tools image
need readelf binutils image
need strip binutils image
need /etc/ssl/certs/ca-certificates.crt ca-certificates image
# The node tier's node (testkit/src/node/): containerd with its CRI plugin (ctr imports the
# images), runc (above), the CNI bridge, host-local and loopback plugins, iptables (kube-proxy,
# the kubelet, and the teardown of their chains) and ip (the teardown of the pods' bridge).
need containerd containerd node
need ctr containerd node
need /usr/lib/cni/bridge containernetworking-plugins node
need /usr/lib/cni/host-local containernetworking-plugins node
need /usr/lib/cni/loopback containernetworking-plugins node
need iptables iptables node
need ip6tables iptables node
need ip iproute2 node
fi

if [[ $(( ${#missing[@]} + ${#missing_image[@]} )) -gt 0 ]]; then
  packages="$(printf '%s\n' "${missing[@]}" "${missing_image[@]}" | awk 'NF && !seen[$0]++' | tr '\n' ' ')"
  if [[ "$(id -u)" -ne 0 ]]; then
    if [[ ${#missing[@]} -gt 0 ]]; then
      echo "error: need root to apt-get install ${packages% }; install them and retry" >&2
      exit 1
    fi
    echo "warning: not root, so not installing ${packages% }: the image tests will be skipped" >&2
  else
    echo "installing Debian packages: ${packages% }" >&2
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null
  fi
fi

# The harness's Go modules need the Go named in their go.mod (Debian's golang-go is older).
need_go=$(awk '$1 == "go" { print $2; exit }' "$here/controlplane/go.mod")
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
[[ "$scope" == demo ]] && exit 0
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "installing rust component $component" >&2
    rustup component add "$component" >/dev/null
  fi
done
[[ "$scope" == check ]] && exit 0

# The container image's static binary (hack/image-context.sh). Without it `make test` says the
# image tests are skipped and why (hack/image.sh ci); the rest of the suite does not need it.
if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
  echo "installing rust target x86_64-unknown-linux-musl" >&2
  rustup target add x86_64-unknown-linux-musl >/dev/null ||
    echo "warning: could not add x86_64-unknown-linux-musl; the image tests will be skipped" >&2
fi

# install_tool CRATE VERSION: hack/install-tool.sh (a pinned prebuilt binary, else cargo install).
install_tool() { "$here/install-tool.sh" "$@"; }

# `make lint` runs `cargo-deny deny check licenses bans sources` (deny.toml) with this version.
install_tool cargo-deny 0.20.2
