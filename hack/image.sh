#!/usr/bin/env bash
# Builds and tests the container image (Makefile targets image, image-upstream, image-test and
# the image tier of `make test`).
#
#   hack/image.sh build       Containerfile.offline from a static musl binary (no pulls)
#   hack/image.sh upstream    Containerfile, multi-stage (pulls BUILDER_IMAGE and BASE_IMAGE)
#   hack/image.sh bundle      bundle/bundle.Containerfile, the OLM bundle image (FROM scratch)
#   hack/image.sh run-options the `podman run` options of every container tests/image/main.rs
#                             starts, one a line
#   hack/image.sh can-test    exit 0 if this machine can build and run the image as the tests
#                             do, else print why not on stdout and exit 1
#   hack/image.sh test        `make image-test`: install what hack/install-deps.sh can, check
#                             can-test (an error if it fails), build, run tests/image/main.rs
#   hack/image.sh ci [FILE]   the image tier of `make test`: as test, but when can-test fails
#                             print `image-test: SKIPPED: <reason>` and exit 0; writes the
#                             tier's result (PASSED, FAILED or SKIPPED (<reason>)) to FILE
#
# Environment: IMAGE (the tag), BASE_IMAGE (the base of either Containerfile; default scratch
# for the offline one, distroless/static for the multi-stage one), BUILDER_IMAGE (multi-stage
# only), ENGINE (podman, buildah or docker; default: the first that works, buildah first for
# building), STORAGE_DRIVER (as podman and buildah read it; both must use the same one), CARGO.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
image="${IMAGE:-quay.io/mosc-guard/mosc-guard:$version}"

works() { command -v "$1" >/dev/null 2>&1 && "$1" info >/dev/null 2>&1; }

# The engine that builds: $ENGINE, else buildah (as root: --isolation chroot needs no
# daemon and no user namespaces), podman, docker.
builder() {
    if [[ -n "${ENGINE:-}" ]]; then
        if ! works "$ENGINE"; then
            echo "$ENGINE is not installed or '$ENGINE info' fails" >&2
            return 1
        fi
        echo "$ENGINE"
        return 0
    fi
    local e
    for e in buildah podman docker; do
        if works "$e"; then echo "$e"; return 0; fi
    done
    local found=""
    for e in buildah podman docker; do
        command -v "$e" >/dev/null 2>&1 && found+=" $e"
    done
    if [[ -z "$found" ]]; then
        echo "no container engine is installed (looked for buildah, podman, docker)" >&2
    else
        echo "no container engine can build:$found installed, but '<engine> info' fails (no daemon or no access?)" >&2
    fi
    return 1
}

# The `podman run` options of every container tests/image/main.rs starts (it reads them from
# `hack/image.sh run-options`) and of can_test's trial container: the runtime, a read-only
# root, no capabilities, no new privileges, the host network, and `--ulimit`s at this
# process's hard limits (podman's defaults are refused where a sandbox lowers them: "error
# setting rlimit").
run_options() {
    local nofile nproc
    nofile="$(ulimit -Hn)"
    nproc="$(ulimit -Hu)"
    [[ "$nofile" =~ ^[0-9]+$ ]] || nofile=1024
    if ! [[ "$nproc" =~ ^[0-9]+$ ]] || ((nproc > 4096)); then nproc=4096; fi
    printf '%s\n' --runtime runc --read-only --cap-drop=ALL --security-opt no-new-privileges \
        --network host --pull never --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc"
}

# The image tier's prerequisites, checked before anything is built: exit 0, or print the
# first one missing (one line, on stdout) and exit 1.
can_test() {
    local reason
    if ! reason="$(builder 2>&1 >/dev/null)"; then
        echo "$reason"
        return 1
    fi
    if ! command -v podman >/dev/null 2>&1; then
        echo "podman is not installed: the image could be built but not run (tests/image/main.rs runs it with podman)"
        return 1
    fi
    if ! podman info >/dev/null 2>&1; then
        echo "podman is installed but 'podman info' fails: $(podman info 2>&1 | tail -n 1)"
        return 1
    fi
    if ! PATH="$PATH:/usr/sbin:/usr/local/sbin:/sbin" runc --version >/dev/null 2>&1; then
        echo "runc is not installed or does not run (Debian package runc; hack/install-deps.sh installs it as root): tests/image/main.rs runs podman --runtime runc"
        return 1
    fi
    if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
        echo "the Rust target x86_64-unknown-linux-musl is not installed (make deps adds it)"
        return 1
    fi
    local tool
    for tool in musl-gcc readelf strip; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "$tool is not installed (hack/install-deps.sh names its Debian package): the image's static binary needs it"
            return 1
        fi
    done
    # A container with the tests' options, from a throwaway root holding /bin/true and its
    # libraries (no image, no registry): the runtime, the rlimits and the non-root user all
    # work here, or the reason is podman's own words.
    local rootfs out lib
    rootfs="$(mktemp -d)"
    chmod 0755 "$rootfs"
    mkdir -p "$rootfs/bin"
    cp /bin/true "$rootfs/bin/true"
    for lib in $(ldd /bin/true 2>/dev/null | grep -oE '/[^ ]+'); do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
    local options
    mapfile -t options < <(run_options)
    if ! out="$(podman run --rm "${options[@]}" --user 65532:65532 --rootfs "$rootfs" /bin/true 2>&1)"; then
        rm -rf "$rootfs"
        echo "podman cannot run a container here with the tests' options (${options[*]}): $(printf '%s\n' "$out" | tail -n 1)"
        return 1
    fi
    rm -rf "$rootfs"
}

# build ENGINE CONTAINERFILE CONTEXT BUILD-ARGS...
build() {
    local engine="$1" file="$2" context="$3"
    shift 3
    local args=(-f "$file" -t "$image" "$@")
    case "$engine" in
        buildah) args=(--isolation chroot "${args[@]}") ;;
        podman) args=(--isolation chroot "${args[@]}") ;;
    esac
    echo "building $image with $engine ($file)" >&2
    local start=$SECONDS
    (set -x; "$engine" build "${args[@]}" "$context")
    echo "built $image in $((SECONDS - start))s" >&2
}

case "${1:-}" in
    build)
        engine="$(builder)" || { echo "error: $(builder 2>&1 || true); cannot build $image" >&2; exit 1; }
        start=$SECONDS
        context="$(hack/image-context.sh)"
        build "$engine" "$root/Containerfile.offline" "$context" \
            --build-arg "BASE_IMAGE=${BASE_IMAGE:-scratch}"
        echo "make image: $image in $((SECONDS - start))s (binary and image)" >&2
        ;;
    upstream)
        engine="$(builder)" || { echo "error: $(builder 2>&1 || true); cannot build $image" >&2; exit 1; }
        extra=()
        [[ -n "${BASE_IMAGE:-}" ]] && extra+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
        [[ -n "${BUILDER_IMAGE:-}" ]] && extra+=(--build-arg "BUILDER_IMAGE=$BUILDER_IMAGE")
        build "$engine" "$root/Containerfile" "$root" "${extra[@]}"
        ;;
    bundle)
        engine="$(builder)" || { echo "error: $(builder 2>&1 || true); cannot build $image" >&2; exit 1; }
        build "$engine" "$root/bundle/bundle.Containerfile" "$root/bundle"
        ;;
    can-test)
        can_test
        ;;
    run-options)
        run_options
        ;;
    test)
        "$root/hack/install-deps.sh"
        if ! reason="$(can_test)"; then
            echo "error: image-test: $reason" >&2
            exit 1
        fi
        "$0" build
        # The test binaries the cargo tier compiled (hack/test.sh: one build for every tier).
        image_tests="$("$root/hack/test.sh" path image)"
        packaging_tests="$("$root/hack/test.sh" path packaging)"
        echo "+ tests/image/main.rs with MOSC_GUARD_IMAGE=$image" >&2
        MOSC_GUARD_IMAGE="$image" "$image_tests" --test-threads=1 --include-ignored
        # The krew release archive from the same static binary, which the build above made.
        echo "+ tests/packaging/plugin.rs's release archive (the static binary built above)" >&2
        "$packaging_tests" --test-threads=1 --ignored plugin::
        ;;
    ci)
        report="${2:-/dev/null}"
        : >"$report"
        # What can be installed is (as root); what cannot makes can_test say why.
        if ! "$root/hack/install-deps.sh"; then
            echo "FAILED (hack/install-deps.sh)" >"$report"
            exit 1
        fi
        if ! reason="$(can_test)"; then
            echo "image-test: SKIPPED: $reason"
            echo "SKIPPED ($reason)" >"$report"
            exit 0
        fi
        echo "+ make image-test (the container image, tests/image/main.rs)"
        if "$0" test; then
            echo PASSED >"$report"
        else
            echo FAILED >"$report"
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 build|upstream|bundle|run-options|can-test|test|ci [FILE]" >&2
        exit 2
        ;;
esac
