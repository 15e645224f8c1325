#!/usr/bin/env bash
# Run every libFuzzer target built in BUILD_DIR (a -DCELLA_FUZZ=ON clang build) for
# FUZZ_SECONDS each, starting from the checked-in corpus tests/fuzz/corpus/<name>/.
# New interesting inputs go to BUILD_DIR/fuzz-corpus/<name>/ (the checked-in corpus is
# never modified; copy a finding there by hand, with a meaningful name, once it is fixed).
# Crashes are written to BUILD_DIR/fuzz-artifacts/<name>/ and make the script fail.
# Usage: scripts/fuzz.sh BUILD_DIR [TARGET...]
set -euo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR [TARGET...]}
shift
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
list="$build/tests/fuzz/targets.txt"
[ -f "$list" ] || { echo "fuzz.sh: $list missing: configure $build with -DCELLA_FUZZ=ON" >&2; exit 2; }
if [ $# -gt 0 ]; then
        targets=("$@")
else
        read -r -a targets <<<"$(tr ';' ' ' <"$list")"
fi
failed=()
for t in "${targets[@]}"; do
        bin="$build/tests/fuzz/fuzz-$t"
        [ -x "$bin" ] || { echo "fuzz.sh: $bin not built" >&2; failed+=("$t"); continue; }
        work="$build/fuzz-corpus/$t"
        artifacts="$build/fuzz-artifacts/$t/"
        mkdir -p "$work" "$artifacts"
        parallel=()
        # With several jobs libFuzzer forks workers that log to fuzz-N.log in the cwd.
        [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
        dict=()
        [ -f "$src/tests/fuzz/$t.dict" ] && dict=(-dict="$src/tests/fuzz/$t.dict")
        echo "=== fuzz-$t: ${seconds}s"
        if ! (cd "$build" && "$bin" -max_total_time="$seconds" "${parallel[@]}" \
                -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
                -artifact_prefix="$artifacts" "${dict[@]}" "$work" "$src/tests/fuzz/corpus/$t" \
                2>"$build/fuzz-$t.log"); then
                tail -n 40 "$build/fuzz-$t.log" >&2
                failed+=("$t")
                continue
        fi
        grep -E '^stat::(number_of_executed_units|new_units_added)' "$build/fuzz-$t.log" || true
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
        exit 1
fi
echo "fuzz.sh: all targets ran ${seconds}s without a finding"
