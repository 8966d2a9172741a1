#!/usr/bin/env bash
# Builds the end-to-end test harness's kube-apiserver, kube-controller-manager, etcd and registry,
# and the node tier's kubelet, kube-proxy and kube-scheduler, from the pinned Go
# modules in hack/controlplane and hack/registry, and opm (operator-registry, which validates
# bundle/ in tests/packaging/olm/) from hack/opm, each only if its cached copy is missing.
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/mosc-guard/bin/<name>-<version>, the version read from the
# go.mod files, so bumping a module version builds a new binary. Builds go to a temporary name and
# are renamed into place, so an interrupted build never leaves a half-written binary behind.
#
# Usage: hack/build-binaries.sh [SET...], each SET one of control-plane (etcd, kube-apiserver,
# kube-controller-manager, the registry: what `make demo` and the test kit's control plane
# run), node (kubelet, kube-proxy, kube-scheduler: the node tier's) and opm (tests/packaging/olm);
# no SET builds them all (`make test`).
#
# Output (stdout): one `name=path` line per binary, for testkit/src/binaries.rs (and opm's for
# tests/packaging/olm/). Build progress goes to stderr; nothing but those lines is printed when
# everything is cached.
set -euo pipefail

sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(control-plane node opm)
for set in "${sets[@]}"; do
    case "$set" in
        control-plane | node | opm) ;;
        *) echo "build-binaries.sh: unknown set '$set' (control-plane, node or opm)" >&2; exit 2 ;;
    esac
done
# wanted SET: whether SET was asked for.
wanted() { [[ " ${sets[*]} " == *" $1 "* ]]; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin_dir="${XDG_CACHE_HOME:-${HOME:?set HOME or XDG_CACHE_HOME}/.cache}/mosc-guard/bin"

# mod_version GO_MOD MODULE: the required version of MODULE in GO_MOD (block or single-line form).
mod_version() {
    local version
    version="$(awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1")"
    if [[ -z "$version" ]]; then
        echo "build-binaries.sh: cannot find a required version of $2 in $1" >&2
        exit 1
    fi
    printf '%s\n' "$version"
}

go_bin=""
find_go() {
    [[ -n "$go_bin" ]] && return 0
    if command -v go >/dev/null 2>&1; then
        go_bin="$(command -v go)"
    elif [[ -x /usr/local/go/bin/go ]]; then
        go_bin=/usr/local/go/bin/go
    else
        echo "build-binaries.sh: the Go toolchain ('go') is not on PATH, and a test binary has to be built." >&2
        echo "build-binaries.sh: install Go (see the 'go' line of hack/controlplane/go.mod for the version)," >&2
        echo "build-binaries.sh: or point MOSC_GUARD_KUBE_APISERVER / MOSC_GUARD_ETCD / MOSC_GUARD_REGISTRY at built binaries." >&2
        exit 1
    fi
}

# build NAME VERSION MODULE_DIR PACKAGE [EXTRA_LDFLAGS [TAGS]]: build PACKAGE into the cache unless present.
build() {
    local name="$1" version="$2" module_dir="$3" package="$4" extra_ldflags="${5:-}" tags="${6:-}"
    local out="$bin_dir/$name-$version"
    if [[ ! -x "$out" ]]; then
        find_go
        mkdir -p "$bin_dir"
        # One builder at a time per cache directory; a waiting process finds the binary when it gets the lock.
        exec 9>"$bin_dir/.build.lock"
        if command -v flock >/dev/null 2>&1; then flock 9; fi
        if [[ ! -x "$out" ]]; then
            local tmp="$out.tmp.$$"
            echo "build-binaries.sh: building $name $version (this can take several minutes) ..." >&2
            local start=$SECONDS
            if ! (cd "$module_dir" && "$go_bin" build -trimpath -buildvcs=false -tags="$tags" \
                -ldflags="-s -w $extra_ldflags" -o "$tmp" "$package"); then
                rm -f "$tmp"
                echo "build-binaries.sh: building $name failed" >&2
                exit 1
            fi
            mv -f "$tmp" "$out"
            echo "build-binaries.sh: built $out in $((SECONDS - start))s" >&2
        fi
        exec 9>&-
    fi
    printf '%s=%s\n' "$name" "$out"
}

cp_mod="$here/controlplane/go.mod"
reg_mod="$here/registry/go.mod"
opm_mod="$here/opm/go.mod"
kube_version="$(mod_version "$cp_mod" k8s.io/kubernetes)"
etcd_version="$(mod_version "$cp_mod" go.etcd.io/etcd/server/v3)"
registry_version="$(mod_version "$reg_mod" github.com/distribution/distribution/v3)"
opm_version="$(mod_version "$opm_mod" github.com/operator-framework/operator-registry)"

# kube-apiserver reports its version from these variables; without them it says v0.0.0-master.
kube_minor="${kube_version#v1.}"
kube_minor="${kube_minor%%.*}"
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version"
kube_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor"
kube_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

if wanted control-plane; then
    build etcd "$etcd_version" "$here/controlplane" ./etcd
    build kube-apiserver "$kube_version" "$here/controlplane" k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
    # The real garbage collector (run with --controllers=garbagecollector only) acts on foregroundDeletion.
    build kube-controller-manager "$kube_version" "$here/controlplane" k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
    # Our own main (hack/registry/main.go): distribution's registry with the storage drivers and
    # auth the harness configures, not the cloud ones; "-fs" names that build in the cache.
    build registry "$registry_version-fs" "$here/registry" .
fi
if wanted node; then
    # The node tier's node (testkit/src/node/): kubelet, kube-proxy (routes the `kubernetes`
    # Service's ClusterIP to the API server for the pods' in-cluster config, and webhook Services
    # to their pods) and kube-scheduler (places the Deployment's pods), all from the same
    # Kubernetes module.
    build kubelet "$kube_version" "$here/controlplane" k8s.io/kubernetes/cmd/kubelet "$kube_ldflags"
    build kube-proxy "$kube_version" "$here/controlplane" k8s.io/kubernetes/cmd/kube-proxy "$kube_ldflags"
    build kube-scheduler "$kube_version" "$here/controlplane" k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
fi
if wanted opm; then
    # opm as operator-registry's Makefile builds it (the OpenPGP implementation in Go instead of
    # gpgme), but without cgo: the tests run `opm render` of a bundle directory and `opm validate`,
    # which never open a SQLite index, and cgo (SQLite's C source above all) cost 40 of 231 s
    # (2026-12-07; the same rendering, byte for byte); `opm version` reports the pinned version.
    opm_pkg=github.com/operator-framework/operator-registry
    CGO_ENABLED=0 build opm "$opm_version" "$here/opm" "$opm_pkg/cmd/opm" \
        "-X $opm_pkg/cmd/opm/version.opmVersion=$opm_version -X $opm_pkg/cmd/opm/version.gitCommit=$opm_version" \
        containers_image_openpgp
fi
