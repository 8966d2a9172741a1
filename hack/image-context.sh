#!/usr/bin/env bash
# Prepares the build context of Containerfile.offline (`make image`) in DIR (default
# target/image-context): rootfs/usr/local/bin/mosc-guard, a static musl release build of the
# guard, stripped; rootfs/etc/ssl/certs/ca-certificates.crt, the host's CA bundle (Debian's
# ca-certificates); rootfs/etc/passwd and rootfs/etc/group naming root and the non-root user
# 65532 (nonroot), as distroless/static has them. Prints the context directory on stdout.
#
# Needs the Rust target x86_64-unknown-linux-musl (hack/install-deps.sh adds it) and
# musl-gcc (Debian's musl-tools) for ring's C and assembly parts.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/target/image-context}"
target=x86_64-unknown-linux-musl
cargo="${CARGO:-cargo}"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "image-context.sh: the Rust target $target is missing: rustup target add $target (make deps)" >&2
    exit 1
fi
if [[ ! -s "$ca_bundle" ]]; then
    echo "image-context.sh: no CA bundle at $ca_bundle (Debian package ca-certificates; or set CA_BUNDLE)" >&2
    exit 1
fi

start=$SECONDS
(cd "$root" && "$cargo" build --locked --release --target "$target" --bin mosc-guard >&2)
target_dir="${CARGO_TARGET_DIR:-target}"
[[ "$target_dir" == /* ]] || target_dir="$root/$target_dir"
bin="$target_dir/$target/release/mosc-guard"
echo "image-context.sh: built $bin in $((SECONDS - start))s" >&2

# Static: no program interpreter, no shared library (readelf is in binutils).
if readelf -l "$bin" | grep -q 'Requesting program interpreter' || readelf -d "$bin" | grep -q NEEDED; then
    echo "image-context.sh: $bin is dynamically linked" >&2
    readelf -d "$bin" >&2 || true
    exit 1
fi

rm -rf "$dir"
mkdir -p "$dir/rootfs/usr/local/bin" "$dir/rootfs/etc/ssl/certs"
install -m 0755 "$bin" "$dir/rootfs/usr/local/bin/mosc-guard"
strip "$dir/rootfs/usr/local/bin/mosc-guard"
install -m 0644 "$ca_bundle" "$dir/rootfs/etc/ssl/certs/ca-certificates.crt"
printf '%s\n' \
    'root:x:0:0:root:/root:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$dir/rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$dir/rootfs/etc/group"
chmod 0644 "$dir/rootfs/etc/passwd" "$dir/rootfs/etc/group"
# Reproducible layer: the same content gives the same files.
find "$dir/rootfs" -exec touch -h -d @0 {} +
printf '%s\n' "$dir"
