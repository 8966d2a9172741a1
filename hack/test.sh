#!/usr/bin/env bash
# Runs the test tiers (the Makefile's test, check, image-test and node-test targets).
#
#   hack/test.sh build        compile every test binary of the workspace once (`cargo test
#                             --no-run`), listed in target/test-binaries.tsv
#   hack/test.sh path NAME    the path of test binary NAME (compiled first; a no-op when fresh)
#   hack/test.sh fast         `make check`'s tests: the unit tests and every integration test
#                             that needs no API server (FAST_TESTS below)
#   hack/test.sh cargo        the cargo tier: every test binary but image and node, JOBS at a
#                             time, each with THREADS test threads, longest first
#   hack/test.sh all          `make test`: `make lint`, then the cargo tier and, beside it, the
#                             image tier (hack/image.sh ci) and the node tier (hack/node.sh
#                             ci), which run the binaries built here once what only they and
#                             packaging's OLM test need is built (prebuild, below, from the
#                             start); ends with the time of each tier and of the ten slowest
#                             test binaries, and the tiers line
#
# Each binary runs from its package's directory (as `cargo test` runs it), its output kept in
# target/test-logs/NAME.log and printed whole when it ends, so concurrent binaries never
# interleave; so is each late tier's (image.out, node.out). Environment: JOBS (default 2),
# THREADS (default 2), CARGO, MAKE.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo="${CARGO:-cargo}"
target_dir="${CARGO_TARGET_DIR:-target}"
[[ "$target_dir" == /* ]] || target_dir="$root/$target_dir"
list="$target_dir/test-binaries.tsv"
logs="$target_dir/test-logs"
times="$target_dir/test-times.tsv"
jobs="${JOBS:-2}"
threads="${THREADS:-2}"
# The priority lint, the test build and the test binaries run at: `all` lowers it (below).
lower=()

# The cargo tier's binaries, longest first (docs/development.md has their times): the unit
# tests of the crate (lib, bin) and of the test kit, then every tests/*/ binary but the image
# and node tiers'.
CARGO_TIER=(mco recover serve reliability prune images packaging check mosc_guard mosc-guard testkit)
# `make check`: binary and the test filters (libtest's substring match) that select what needs
# no API server, no registry and no MCO simulator.
FAST_TESTS=(
    "mosc_guard"
    "mosc-guard"
    "testkit"
    "check cli::"
    "recover cli::dumps::"
    "prune cli::dumps::"
    "serve https:: certs_cli::"
    "packaging doc_links:: fresh_check:: install_tool:: runner:: alerts:: dashboard:: manifests::rendering::"
)

# build: one `cargo test --no-run` for the whole workspace, so every binary shares one feature
# resolution (a single package's build would resolve others and compile the crate again).
build() {
    mkdir -p "$target_dir"
    local start=$SECONDS json
    json="$(mktemp)"
    if ! "${lower[@]}" "$cargo" test --workspace --locked --no-run --message-format=json-render-diagnostics >"$json"; then
        rm -f "$json"
        return 1
    fi
    # Replaced whole: a tier running beside this build reads the list.
    artifacts <"$json" >"$list.tmp.$$"
    mv -f "$list.tmp.$$" "$list"
    rm -f "$json"
    echo "test binaries: $(wc -l <"$list") built in $((SECONDS - start))s ($list)" >&2
}

# artifacts: from cargo's JSON messages on stdin, one line per test binary: name<TAB>package
# directory<TAB>executable.
artifacts() {
    grep '"reason":"compiler-artifact"' | grep -E '"profile":\{[^}]*"test":true' |
        sed -nE 's/.*"manifest_path":"([^"]+)\/Cargo.toml".*"target":\{[^}]*"name":"([^"]+)".*"executable":"([^"]+)".*/\2\t\1\t\3/p'
}

# field NAME COLUMN: column 2 (package directory) or 3 (executable) of binary NAME.
field() {
    local row
    row="$(awk -F'\t' -v n="$1" '$1 == n { print; exit }' "$list" 2>/dev/null || true)"
    if [[ -z "$row" ]]; then
        echo "hack/test.sh: no test binary named $1 in $list" >&2
        return 1
    fi
    printf '%s\n' "$row" | cut -f"$2"
}

# run_one NAME ARGS...: runs binary NAME from its package directory with ARGS, its output in
# $logs/NAME.log; records its wall time in $times; prints the log when it ends.
run_one() {
    local name="$1"
    shift
    local dir exe start status=0
    dir="$(field "$name" 2)" && exe="$(field "$name" 3)" || return 1
    start=$SECONDS
    (cd "$dir" && "${lower[@]}" "$exe" "$@") >"$logs/$name.log" 2>&1 || status=$?
    printf 'binary\t%s\t%s\t%s\n' "$name" "$((SECONDS - start))" "$status" >>"$times"
    {
        echo "=== $name: exit $status in $((SECONDS - start))s ($*)"
        cat "$logs/$name.log"
    } >&2
    return "$status"
}

# pool ENTRY...: runs each entry ("NAME ARGS...") with at most $jobs at once; fails if any did.
# In a subshell of its own, so `wait -n` waits for its entries only, never for a tier the
# caller runs beside it.
pool() (
    status=0
    running=0
    for entry in "$@"; do
        if ((running >= jobs)); then
            wait -n || status=1
            running=$((running - 1))
        fi
        # shellcheck disable=SC2086 # an entry is a name and its arguments, one word each
        run_one $entry &
        running=$((running + 1))
    done
    while ((running > 0)); do
        wait -n || status=1
        running=$((running - 1))
    done
    exit "$status"
)

# totals: the sum of every log's libtest result lines, as one closing line.
totals() {
    cat "$logs"/*.log 2>/dev/null | awk '
        /^test result: / {
            for (i = 1; i <= NF; i++) {
                if ($(i + 1) ~ /^passed/) p += $i
                if ($(i + 1) ~ /^failed/) f += $i
                if ($(i + 1) ~ /^ignored/) g += $i
            }
        }
        END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, g }'
}

cargo_tier() {
    local entries=() name
    for name in "${CARGO_TIER[@]}"; do
        case "$name" in
            mosc_guard | mosc-guard | testkit) entries+=("$name") ;;
            *) entries+=("$name --test-threads=$threads") ;;
        esac
    done
    pool "${entries[@]}"
}

fast() { pool "${FAST_TESTS[@]}"; }

# prebuild: what only the image and node tiers and packaging's OLM test need, built from the
# start of `make test`. The image's static release binary (hack/image-context.sh) first and at
# normal priority, above everything else `all` runs (`lower`): its fat-LTO link runs on one core
# for minutes, and beside tests at the same priority it got so little of it that the image and
# node tiers started minutes after the cargo tier ended (fresh check of 7ffa5c0). Beside it, as
# low as the tests, opm (packaging's OLM test waits for it) and then the node's Go binaries.
# Whoever needs one of them first waits for it (hack/build-binaries.sh's lock, cargo's) or builds
# it, so a failure here only costs time: the tier that needs what failed builds it again and
# says why.
prebuild() {
    local release status=0
    hack/image-context.sh >/dev/null &
    release=$!
    # The control plane's binaries first (`all` builds them beside this; the lock makes this
    # wait for that build), so opm never holds up the cargo tier's.
    "${lower[@]}" hack/build-binaries.sh control-plane >/dev/null || status=1
    "${lower[@]}" hack/build-binaries.sh opm >/dev/null || status=1
    "${lower[@]}" hack/build-binaries.sh node >/dev/null || status=1
    wait "$release" || status=1
    return "$status"
}

# late_tiers IMAGE_REPORT NODE_REPORT: the prebuild, then the image tier and the node tier,
# beside lint, the test build and the cargo tier (the tiers' `hack/test.sh path` waits for the
# test build: cargo's lock); each tier's output kept in $logs/NAME.out and printed whole when
# it ends, its result (PASSED, FAILED, SKIPPED (...)) written to its report file.
late_tiers() {
    local status=0 name report
    if ! tier prebuild prebuild >"$logs/prebuild.out" 2>&1; then
        echo "prebuild failed (the tiers below build what they need themselves):" >&2
        tail -n 20 "$logs/prebuild.out" >&2
    fi
    for name in image node; do
        report="$1"
        [[ "$name" == image ]] || report="$2"
        tier "$name" env CARGO="$cargo" "hack/$name.sh" ci "$report" >"$logs/$name.out" 2>&1 || status=1
        {
            echo "=== tier $name"
            cat "$logs/$name.out"
        } >&2
    done
    return "$status"
}

# stop_tree PID: stops PID and every process it started (lint failed: the late tiers' builds
# must not outlive `make test`).
stop_tree() {
    local child
    for child in $(pgrep -P "$1" || true); do
        stop_tree "$child"
    done
    kill "$1" 2>/dev/null || true
}

# tier NAME COMMAND...: runs COMMAND, recording its wall time as tier NAME.
tier() {
    local name="$1" start=$SECONDS status=0
    shift
    "$@" || status=$?
    printf 'tier\t%s\t%s\t%s\n' "$name" "$((SECONDS - start))" "$status" >>"$times"
    return "$status"
}

summary() {
    echo "== where the time went (seconds) =="
    awk -F'\t' '$1 == "tier" { printf "  tier %-18s %5d%s\n", $2, $3, ($4 == 0 ? "" : "  (failed)") }' "$times"
    echo "  slowest test binaries:"
    awk -F'\t' '$1 == "binary"' "$times" | sort -t$'\t' -k3,3nr | head -n 10 |
        awk -F'\t' '{ printf "    %-16s %5d%s\n", $2, $3, ($4 == 0 ? "" : "  (failed)") }'
}

# failures: for every test that panicked, where and why (the panic line and up to 8 lines of
# its message), so the end of a long run says it even when its middle is cut.
failures() {
    local log
    for log in "$logs"/*.log; do
        [[ -e "$log" ]] || continue
        awk -v bin="$(basename "$log" .log)" '
            /^thread .* panicked at / { n = 9; printf "  [%s] %s\n", bin, substr($0, 1, 300); next }
            n > 0 && (/^stack backtrace:/ || /^note: run with/) { n = 0 }
            n > 1 { printf "      %s\n", substr($0, 1, 300); n--; if (n == 1) n = 0 }
        ' "$log"
    done
}

fresh_logs() {
    rm -rf "$logs"
    mkdir -p "$logs"
    : >"$times"
}

main() {
    case "${1:-}" in
        build)
            build
            ;;
        path)
            build
            field "${2:?usage: $0 path NAME}" 3
            ;;
        fast | cargo)
            build
            fresh_logs
            status=0
            if [[ "$1" == fast ]]; then fast || status=1; else cargo_tier || status=1; fi
            totals
            ((status == 0)) || failures
            exit "$status"
            ;;
        all)
            fresh_logs
            started=$SECONDS
            status=0
            # Everything but the release build and the image and node tiers' tests one step
            # lower (nice 10: a tenth of the weight), so the release build gets a core when it
            # needs one and those two tiers end while the cargo tier still runs.
            lower=(nice -n 10)
            image_report="$(mktemp)"
            node_report="$(mktemp)"
            # The cargo tier's Go binaries (cached after `make demo`), built beside lint.
            tier binaries "${lower[@]}" hack/build-binaries.sh control-plane >"$logs/binaries.out" 2>&1 &
            binaries_pid=$!
            late_tiers "$image_report" "$node_report" &
            late_pid=$!
            if ! tier lint "${lower[@]}" "${MAKE:-make}" --no-print-directory lint; then
                stop_tree "$late_pid"
                stop_tree "$binaries_pid"
                rm -f "$image_report" "$node_report"
                echo "make test: lint failed; no tier ran" >&2
                exit 1
            fi
            tier build build || status=1
            if ! wait "$binaries_pid"; then
                echo "building the control plane's binaries failed (the end-to-end tests will say so too):" >&2
                tail -n 20 "$logs/binaries.out" >&2
                status=1
            fi
            if tier cargo cargo_tier; then cargo_result=PASSED; else cargo_result=FAILED; status=1; fi
            totals
            wait "$late_pid" || status=1
            image_result="$(cat "$image_report")"
            node_result="$(cat "$node_report")"
            rm -f "$image_report" "$node_report"
            summary
            echo "  all tiers: $((SECONDS - started))"
            if ((status != 0)); then
                echo "== why the failed tests failed =="
                failures
            fi
            echo "make test: tiers: cargo tests $cargo_result; image tests ${image_result:-FAILED}; node tests ${node_result:-FAILED}"
            exit "$status"
            ;;
        *)
            echo "usage: $0 build|path NAME|fast|cargo|all" >&2
            exit 2
            ;;
    esac
}

# Sourced (tests/packaging/runner.rs), it only defines its functions.
[[ "${BASH_SOURCE[0]}" != "$0" ]] || main "$@"
