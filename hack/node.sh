#!/usr/bin/env bash
# The node tier (Makefile targets node-test and the node tier of `make test`): the shipped
# manifests applied with `kubectl apply -k` to a control plane with a real node (kubelet,
# kube-proxy, containerd, runc, a CNI bridge; testkit/src/node/), the guard running as the
# Deployment's pods from the image `make image` builds (tests/node/).
#
#   hack/node.sh can-test    exit 0 if this machine can run the node, else print why not on
#                            stdout and exit 1
#   hack/node.sh test        `make node-test`: install what hack/install-deps.sh can, check
#                            can-test (an error if it fails), build the image (hack/image.sh
#                            build: cached, so cheap right after the image tier), run tests/node
#   hack/node.sh ci [FILE]   the node tier of `make test`: as test, but when can-test fails
#                            print `node-test: SKIPPED: <reason>` and exit 0; writes the tier's
#                            result (PASSED, FAILED or SKIPPED (<reason>)) to FILE
#
# Environment: IMAGE (the tag; default the crate version's, as `make image`), CARGO.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
image="${IMAGE:-quay.io/mosc-guard/mosc-guard:$version}"
export PATH="$PATH:/usr/sbin:/sbin"

# The node's prerequisites, checked before anything is built: exit 0, or print the first one
# missing (one line, on stdout) and exit 1.
can_test() {
    if [[ "$(id -u)" -ne 0 ]]; then
        echo "not root: the node's kubelet, containerd and runc need root (mounts, cgroups, network namespaces)"
        return 1
    fi
    local path
    for path in /usr/bin/containerd /usr/bin/ctr /usr/sbin/runc /usr/lib/cni/bridge \
        /usr/lib/cni/host-local /usr/lib/cni/loopback; do
        if [[ ! -x "$path" ]]; then
            echo "$path is missing (hack/install-deps.sh names its Debian package and installs it as root)"
            return 1
        fi
    done
    local tool
    for tool in iptables ip; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "$tool is not installed (hack/install-deps.sh names its Debian package)"
            return 1
        fi
    done
    if [[ ! -d /sys/fs/cgroup/memory ]] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        echo "no memory cgroup controller at /sys/fs/cgroup: the kubelet cannot enforce the pods' memory limits"
        return 1
    fi
    # The pods run the image, and the pause image is built the same way: the image tier's
    # prerequisites (buildah or podman, runc, musl) hold too.
    local reason
    if ! reason="$("$root/hack/image.sh" can-test)"; then
        echo "the image cannot be built or run here: $reason"
        return 1
    fi
}

case "${1:-}" in
    can-test)
        can_test
        ;;
    test)
        "$root/hack/install-deps.sh"
        if ! reason="$(can_test)"; then
            echo "error: node-test: $reason" >&2
            exit 1
        fi
        "$root/hack/image.sh" build
        echo "+ tests/node with MOSC_GUARD_IMAGE=$image" >&2
        start=$SECONDS
        status=0
        node_tests="$("$root/hack/test.sh" path node)"
        MOSC_GUARD_IMAGE="$image" "$node_tests" --test-threads=1 --include-ignored || status=$?
        echo "node-test: tests/node ran in $((SECONDS - start))s" >&2
        exit "$status"
        ;;
    ci)
        report="${2:-/dev/null}"
        : >"$report"
        if ! reason="$(can_test)"; then
            echo "node-test: SKIPPED: $reason"
            echo "SKIPPED ($reason)" >"$report"
            exit 0
        fi
        echo "+ make node-test (the manifests' Deployment on a real node, tests/node)"
        if "$0" test; then
            echo PASSED >"$report"
        else
            echo FAILED >"$report"
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 can-test|test|ci [FILE]" >&2
        exit 2
        ;;
esac
