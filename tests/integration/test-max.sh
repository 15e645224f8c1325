#!/bin/bash
# --max-sandboxes: beyond it creating fails with SANDBOX_LIMIT_REACHED and nothing else
# breaks; a destroy makes room again.
. "$(dirname "$0")/lib.sh"
start_cellad --max-sandboxes 2

A=$(sbx one)
B=$(sbx two)
C=$(sbx three)
assert_eq a "$(run_in "$A" 'echo a')" "first sandbox"
assert_eq b "$(run_in "$B" 'echo b')" "second sandbox"
sx "$C" 'echo c'
expect_status 429 SANDBOX_LIMIT_REACHED
api_json PUT "/v1/sandboxes/$C" '{}'
expect_status 429 SANDBOX_LIMIT_REACHED
api GET "/v1/sandboxes" >/dev/null
assert_eq 2 "$(body '.sandboxes | length')" "only two sandboxes exist"
# Pool sandboxes count against the limit too: with two user sandboxes the pool is empty,
# and the only directories are the two sandboxes' own.
wait_pool_ready 0
assert_eq "$(printf 's%s\n' "$(sandbox_slot "$A")" "$(sandbox_slot "$B")" | sort | xargs)" \
        "$(cd "$IT_TMP/data/sandboxes" && ls | sort | xargs)" "a refused sandbox left no directory"
assert_eq a "$(run_in "$A" 'echo a')" "the others keep working"

api DELETE "/v1/sandboxes/$B" >/dev/null
expect_status 200
assert_eq c "$(run_in "$C" 'echo c')" "room again after a destroy"
info "max-sandboxes: ok"
