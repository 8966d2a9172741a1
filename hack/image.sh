#!/usr/bin/env bash
# Builds and tests the container image (Makefile targets image, image-upstream, image-test and
# the image part of `make test`).
#
#   hack/image.sh build       Containerfile.offline from a static musl binary (no pulls)
#   hack/image.sh upstream    Containerfile, multi-stage (pulls BUILDER_IMAGE and BASE_IMAGE)
#   hack/image.sh bundle      bundle/bundle.Containerfile, the OLM bundle image (FROM scratch)
#   hack/image.sh can-test    exit 0 if this machine can build and run the image, else print
#                             why not on stdout and exit 1
#   hack/image.sh ci          `make image-test` if can-test, else say that it is skipped and why
#
# Environment: IMAGE (the tag), BASE_IMAGE (the base of either Containerfile; default scratch
# for the offline one, distroless/static for the multi-stage one), BUILDER_IMAGE (multi-stage
# only), ENGINE (podman, buildah or docker; default: the first that works, buildah first for
# building), STORAGE_DRIVER (as podman and buildah read it; both must use the same one).
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
        if ! reason="$(builder 2>&1 >/dev/null)"; then
            echo "$reason"
            exit 1
        fi
        if ! command -v podman >/dev/null 2>&1; then
            echo "podman is not installed: the image could be built but not run (tests/image.rs runs it with podman)"
            exit 1
        fi
        if ! podman info >/dev/null 2>&1; then
            echo "podman is installed but 'podman info' fails: $(podman info 2>&1 | tail -n 1)"
            exit 1
        fi
        if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
            echo "the Rust target x86_64-unknown-linux-musl is not installed (make deps adds it)"
            exit 1
        fi
        ;;
    ci)
        if reason="$("$0" can-test)"; then
            echo "+ make image-test (the container image, tests/image.rs)"
            exec "${MAKE:-make}" --no-print-directory image-test
        fi
        echo "image-test: SKIPPED: $reason"
        ;;
    *)
        echo "usage: $0 build|upstream|bundle|can-test|ci" >&2
        exit 2
        ;;
esac
