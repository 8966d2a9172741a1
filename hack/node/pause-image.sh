#!/usr/bin/env bash
# The node tier's pause image (testkit/src/node/): pause.c beside this script, compiled static
# with musl-gcc, on an empty root (FROM scratch), committed with buildah as
# localhost/mosc-guard-pause:<first 12 hex of pause.c's sha256> and saved with `podman save` into
# ${XDG_CACHE_HOME:-$HOME/.cache}/mosc-guard/node/, where containerd imports it
# (`ctr -n k8s.io images import`). Nothing is pulled. Built once per content of pause.c.
#
# Output (stdout): `image=<reference>` and `archive=<path>`; progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-${HOME:?set HOME or XDG_CACHE_HOME}/.cache}/mosc-guard/node"
tag="$(sha256sum "$here/pause.c" | cut -c1-12)"
image="localhost/mosc-guard-pause:$tag"
archive="$cache/pause-$tag.tar"

if [[ ! -s "$archive" ]]; then
    mkdir -p "$cache"
    exec 9>"$cache/.pause.lock"
    flock 9
    if [[ ! -s "$archive" ]]; then
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
        musl-gcc -static -Os -s -o "$work/pause" "$here/pause.c"
        container="$(buildah from scratch)"
        buildah copy --chmod 0755 "$container" "$work/pause" /pause >/dev/null
        buildah config --entrypoint '["/pause"]' --user 65535:65535 "$container"
        buildah commit --quiet --rm "$container" "$image" >/dev/null
        podman save --quiet --format docker-archive -o "$work/pause.tar" "$image"
        mv -f "$work/pause.tar" "$archive"
        echo "pause-image.sh: built $image into $archive" >&2
    fi
fi
printf 'image=%s\narchive=%s\n' "$image" "$archive"
