#!/usr/bin/env bash
# Run every libFuzzer target built in BUILD_DIR (a -DCELLA_FUZZ=ON clang build) for
# FUZZ_SECONDS each, starting from the checked-in corpus tests/fuzz/corpus/<name>/.
# New interesting inputs go to BUILD_DIR/fuzz-corpus/<name>/. With FUZZ_GROW=1 (make fuzz
# sets it), once a target ran without a finding, the inputs of that run that add coverage
# to the checked-in corpus (libFuzzer's -merge=1 against it) are copied into it as
# grown-<sha1 prefix>: commit them. tests/fuzz/make-corpus.py leaves grown-* files alone.
# Crashes are written to BUILD_DIR/fuzz-artifacts/<name>/ and make the script fail; keep a
# fixed one as a named seed in make-corpus.py.
# Usage: scripts/fuzz.sh BUILD_DIR [TARGET...]
set -euo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR [TARGET...]}
shift
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
grow=${FUZZ_GROW:-0}
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
        if [ "$grow" = 1 ]; then
                # Merge into a copy of the checked-in corpus: what the merge adds to the copy
                # is what adds coverage; it goes in under its content's name.
                corpus="$src/tests/fuzz/corpus/$t"
                tmp=$(mktemp -d "$build/fuzz-merge-$t.XXXXXX")
                cp -a "$corpus/." "$tmp/"
                if (cd "$build" && "$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
                        "$tmp" "$work" 2>"$build/fuzz-merge-$t.log"); then
                        added=0
                        for f in "$tmp"/*; do
                                [ -e "$corpus/$(basename "$f")" ] && continue
                                name="grown-$(sha1sum "$f" | cut -c1-16)"
                                [ -e "$corpus/$name" ] || { cp "$f" "$corpus/$name"; added=$((added + 1)); }
                        done
                        echo "fuzz-$t: $added inputs added to tests/fuzz/corpus/$t"
                else
                        tail -n 20 "$build/fuzz-merge-$t.log" >&2
                        failed+=("$t(merge)")
                fi
                rm -rf "$tmp"
        fi
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "fuzz.sh: FAILED: ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
        exit 1
fi
echo "fuzz.sh: all targets ran ${seconds}s without a finding"
