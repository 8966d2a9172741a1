#!/usr/bin/env bash
# The krew release archive of the plugin and its manifest (`make plugin-archive`):
#   OUT/mosc-guard_v<version>_linux_amd64.tar.gz   kubectl-mosc_guard, a static musl build
#   OUT/mosc-guard.yaml                            plugins/mosc-guard.yaml with its sha256
# OUT defaults to target/plugin. PLUGIN_BIN=path packs that binary instead of building one
# (tests/packaging/plugin.rs packs the test build). Prints the archive's path.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/target/plugin}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
bin="${PLUGIN_BIN:-}"
if [[ -z "$bin" ]]; then
    target=x86_64-unknown-linux-musl
    (cd "$root" && "${CARGO:-cargo}" build --locked --release --target "$target" --bin mosc-guard >&2)
    target_dir="${CARGO_TARGET_DIR:-target}"
    [[ "$target_dir" == /* ]] || target_dir="$root/$target_dir"
    bin="$target_dir/$target/release/mosc-guard"
fi

mkdir -p "$out"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/kubectl-mosc_guard"
archive="$out/mosc-guard_v${version}_linux_amd64.tar.gz"
# Reproducible: fixed owner, mode and time, no gzip timestamp.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - kubectl-mosc_guard \
    | gzip -n >"$archive"
sum="$(sha256sum "$archive" | cut -d' ' -f1)"
sed -e "s/^\(      sha256: \).*/\1\"$sum\"/" \
    -e "s/^\(  version: \).*/\1v$version/" \
    -e "s#/download/v[^/]*/mosc-guard_v[^/]*_linux_amd64.tar.gz#/download/v$version/mosc-guard_v${version}_linux_amd64.tar.gz#" \
    "$root/plugins/mosc-guard.yaml" >"$out/mosc-guard.yaml"
echo "plugin-archive.sh: $archive (sha256 $sum), manifest $out/mosc-guard.yaml" >&2
printf '%s\n' "$archive"
