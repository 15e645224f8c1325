#!/bin/bash
# Sandbox lifecycle and HTTP contract: lazy creation, list, info, destroy leaves nothing
# behind, invalid names, malformed JSON, unknown routes, huge headers, auth.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx life)

info "health"
api GET /v1/health >/dev/null
expect_status 200
assert_eq ok "$(body .status)" "health status"
assert_eq 0 "$(body .sandboxes)" "no sandboxes yet"

info "lazy creation, info, list"
api GET "/v1/sandboxes/$S" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_eq "" "$(sandbox_cgroups "$S")" "cgroup before creation"
assert_eq hi "$(run_in "$S" 'echo hi')" "exec creates the sandbox"
api GET "/v1/sandboxes/$S" >/dev/null
expect_status 200
assert_eq "$S" "$(body .id)" "info id"
assert_eq running "$(body .state)" "info state"
assert_eq default "$(body .image)" "info image"
api GET /v1/sandboxes >/dev/null
expect_status 200
assert_eq "$S" "$(body '[.sandboxes[].id] | join(",")')" "list"
api_json PUT "/v1/sandboxes/$(sbx put)" '{"labels":{"team":"x"},"instanceType":"lite"}'
expect_status 201
assert_eq x "$(body .labels.team)" "labels"
api_json PUT "/v1/sandboxes/$(sbx put)" '{"labels":{"team":"y"}}'
expect_status 200
api_json PUT "/v1/sandboxes/$(sbx put)" '{"labels":{"tier":"1"},"env":{"B":"2"}}'
expect_status 200
assert_eq '{"tier":"1"}' "$(body .labels | jq -c .)" "PUT replaces labels"
api_json PUT "/v1/sandboxes/$(sbx put)" '{"env":{"C":"3"}}'
assert_eq '{"tier":"1"}' "$(body .labels | jq -c .)" "PUT without labels keeps them"
assert_eq 3 "$(body .env.C)" "PUT env adds"
assert_eq 2 "$(body .env.B)" "PUT env keeps the others"
api_json PUT "/v1/sandboxes/$(sbx put)" '{"labels":{}}'
assert_eq '{}' "$(body .labels | jq -c .)" "PUT labels {} clears them"
api GET /v1/health >/dev/null
assert_eq 2 "$(body .sandboxes)" "health counts sandboxes"
assert_eq "$S" "$(run_in "$S" hostname)" "hostname"

info "destroy leaves no process, mount or cgroup"
run_in "$S" '(sleep 600 >/dev/null 2>&1 &); echo' >/dev/null
[ -n "$(sandbox_pids "$S")" ] || fail "no processes found for $S before destroy"
[ -n "$(sandbox_cgroups "$S")" ] || fail "no cgroup found for $S before destroy"
mounts_before=$(grep -c "$IT_TMP" /proc/self/mountinfo || true)
api DELETE "/v1/sandboxes/$S" >/dev/null
expect_status 200
assert_eq true "$(body .destroyed)" "destroyed"
left=$(wait_empty sandbox_pids "$S") || fail "processes left: $left"
left=$(wait_empty sandbox_cgroups "$S") || fail "cgroups left: $left"
grep -F "$IT_TMP" /proc/*/mountinfo 2>/dev/null | grep -F "$S" &&
        fail "mounts of $S left (before: $mounts_before)"
# cellad reaps the sandbox's PID 1: no zombie child is left behind.
zombies() {
        ps -eo pid=,ppid=,stat=,args= | awk -v p="$CELLAD_PID" '$2 == p && $3 ~ /^Z/'
}
left=$(wait_empty zombies) || fail "cellad did not reap destroyed sandbox processes: $left"
api GET "/v1/sandboxes/$S" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api DELETE "/v1/sandboxes/$S" >/dev/null
expect_status 200
assert_eq false "$(body .destroyed)" "destroy is idempotent"
# The name can be used again: a fresh sandbox, without the old one's files.
run_in "$S" 'echo x > /workspace/old' >/dev/null
api DELETE "/v1/sandboxes/$S" >/dev/null
assert_eq new "$(run_in "$S" 'test -e /workspace/old || echo new')" "recreated sandbox is fresh"

info "invalid names"
for n in UPPER 'a_b' '-lead' "$(printf 'x%.0s' $(seq 1 100))" 'a.b' '..'; do
        api_json POST "/v1/sandboxes/$n/exec" '{"command":"true"}'
        case "$API_STATUS" in
        400) assert_eq INVALID_SANDBOX_NAME "$(body .code)" "code for name [$n]" ;;
        404) ;; # a name with a dot-segment may not even route
        *) fail "name [$n]: HTTP $API_STATUS $(body)" ;;
        esac
done
api GET /v1/sandboxes >/dev/null
assert_eq 2 "$(body '.sandboxes | length')" "invalid names created sandboxes"

info "malformed requests"
E=/v1/sandboxes/$(sbx e)/exec
api_json POST "$E" '{"command":'
expect_status 400 VALIDATION_FAILED
api_json POST "$E" '[1,2]'
expect_status 400 VALIDATION_FAILED
api_json POST "$E" '{"command":42}'
expect_status 400 VALIDATION_FAILED
api_json POST "$E" '{"command":"true","bogus":1}'
expect_status 400 VALIDATION_FAILED
api_json POST "$E" '{"command":"true","command":"false"}'
expect_status 400 VALIDATION_FAILED
api_json POST "$E" '{"command":"true","timeout":-1}'
expect_status 400 VALIDATION_FAILED
# Validation happens before lazy creation: no sandbox was made by the bad requests.
api GET "/v1/sandboxes/$(sbx e)" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "a GET or HEAD creates nothing (any web page can make a browser send one)"
G=$(sbx csrf1)
before=$(api GET /v1/sandboxes | jq -c '[.sandboxes[].id] | sort')
for route in "files/exists?path=x" "files/list" "files/list?path=/" "files?path=x" \
        processes processes/p1 processes/p1/logs sessions sessions/default contexts; do
        api GET "/v1/sandboxes/$G/$route" >/dev/null
        expect_status 404 SANDBOX_NOT_FOUND
done
# ports had this rule already
api GET "/v1/sandboxes/$G/ports" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# as an <img> sends it: no header beyond Host, not even Accept or User-Agent
st=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Accept:' -H 'User-Agent:' \
        "$CELLA_URL/v1/sandboxes/$G/files/exists?path=x")
assert_eq 404 "$st" "bare GET of a missing sandbox"
st=$(curl -sS -o /dev/null -w '%{http_code}' -I "$CELLA_URL/v1/sandboxes/$G/files?path=x")
assert_eq 404 "$st" "HEAD of a missing sandbox"
api GET /v1/sandboxes >/dev/null
assert_eq "$before" "$(body '[.sandboxes[].id] | sort' | jq -c .)" "a GET created a sandbox"
api GET "/v1/sandboxes/$G" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# Writes still create; a GET of a sandbox that exists works, a sleeping one wakes.
api PUT "/v1/sandboxes/$G/files?path=x" --data-binary 'hello' >/dev/null
expect_status 200
api GET "/v1/sandboxes/$G/files?path=x" >/dev/null
expect_status 200
assert_eq hello "$(body)" "GET of an existing sandbox's file"
api DELETE "/v1/sandboxes/$G" >/dev/null
api_json PUT "/v1/sandboxes/$G" '{"sleepAfter":1}'
expect_status 201
run_in "$G" 'echo kept >/workspace/k' >/dev/null
for i in $(seq 1 100); do
        api GET "/v1/sandboxes/$G" >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "idle sandbox sleeps"
api GET "/v1/sandboxes/$G/files?path=k" >/dev/null
expect_status 200
assert_eq kept "$(body)" "GET wakes a sleeping sandbox"
api DELETE "/v1/sandboxes/$G" >/dev/null
expect_status 200
api DELETE "/v1/sandboxes/$G" >/dev/null
assert_eq false "$(body .destroyed)" "DELETE of a missing sandbox stays idempotent"

api GET /v1/nope >/dev/null
expect_status 404 NOT_FOUND
api GET /nope >/dev/null
expect_status 404 NOT_FOUND
api PATCH /v1/health >/dev/null
expect_status 405 METHOD_NOT_ALLOWED

info "routing: a path's parameters are checked before what follows them"
# route METHOD PATH STATUS CODE MESSAGE: the whole answer of the route table and its
# parameter checks (nothing here reaches a sandbox: each is refused first).
route() {
        api "$1" "$2" >/dev/null
        expect_status "$3" "$4"
        assert_eq "$5" "$(body .message)" "$1 $2"
}
R=/v1/sandboxes/$(sbx route)
route GET "$R/nope" 404 NOT_FOUND "no route $R/nope"
route GET "$R/" 404 NOT_FOUND "no route $R/"
route POST "$R/exec/" 404 NOT_FOUND "no route $R/exec/"
route POST "$R/files/nope" 404 NOT_FOUND "no route $R/files/nope"
route GET "$R/exec" 405 METHOD_NOT_ALLOWED "method GET not allowed on $R/exec"
route GET "$R/files/read" 405 METHOD_NOT_ALLOWED "method GET not allowed on $R/files/read"
st=$(curl -sS -o /dev/null -w '%{http_code}' -I "$CELLA_URL$R/contexts")
assert_eq 405 "$st" "HEAD of contexts (GET only)"
route POST "$R" 405 METHOD_NOT_ALLOWED "method POST not allowed on $R"
route GET "/v1/sandboxes/Bad!/nope" 400 INVALID_SANDBOX_NAME \
        "$(api GET '/v1/sandboxes/Bad!' >/dev/null; body .message)"
route GET "$R/nope?normalizeId=maybe" 400 VALIDATION_FAILED \
        "normalizeId must be true, false, 1 or 0"
route GET "$R/processes/" 400 VALIDATION_FAILED "process id must be 1..64 of [A-Za-z0-9_.-]"
route GET "$R/processes/bad!/nope" 400 VALIDATION_FAILED \
        "process id must be 1..64 of [A-Za-z0-9_.-]"
route GET "$R/processes/p1/nope" 404 NOT_FOUND "no route $R/processes/p1/nope"
route POST "$R/processes/p1/logs" 405 METHOD_NOT_ALLOWED \
        "method POST not allowed on $R/processes/p1/logs"
route GET "$R/sessions/" 400 VALIDATION_FAILED \
        "session id must be 1-64 characters of [A-Za-z0-9_.-]"
route GET "$R/sessions/s1/env" 405 METHOD_NOT_ALLOWED \
        "method GET not allowed on $R/sessions/s1/env"
route GET "$R/contexts/a/b" 404 CONTEXT_NOT_FOUND "no code context 'a/b'"
route DELETE "$R/ports/80/x" 400 INVALID_PORT "bad port '80/x'"
route GET "$R/ports/80" 405 METHOD_NOT_ALLOWED "method GET not allowed on $R/ports/80"
route GET "$R/ws/x" 400 INVALID_PORT "bad port in $R/ws/x"
route GET "$R/ws" 404 NOT_FOUND "no route $R/ws"
route GET /v1/images/x 405 METHOD_NOT_ALLOWED "method GET not allowed on /v1/images/x"
route GET /v1/images/x/nope 404 NOT_FOUND "no route /v1/images/x/nope"
route DELETE "/v1/images/$(head -c 300 /dev/zero | tr '\0' i)/x" 400 VALIDATION_FAILED \
        "image name too long"
api GET "${R}" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
# Huge headers: 70 KiB in one header.
big=$(head -c 70000 /dev/zero | tr '\0' a)
api GET /v1/health -H "X-Big: $big" >/dev/null
expect_status 431
# Over 100 headers
hdrs=()
for i in $(seq 1 120); do hdrs+=(-H "X-H$i: v"); done
api GET /v1/health "${hdrs[@]}" >/dev/null
expect_status 431
# URL over 8 KiB
api GET "/v1/sandboxes/$(sbx u)/files?path=$(head -c 9000 /dev/zero | tr '\0' a)" >/dev/null
expect_status 414
# Cross-origin request refused
api_json POST "$E" '{"command":"true"}' 2>/dev/null
api POST "$E" -H 'Origin: http://evil.example' -H 'Content-Type: application/json' \
        --data-binary '{"command":"true"}' >/dev/null
expect_status 403 PERMISSION_DENIED
# The daemon still works after all of that
api GET /v1/health >/dev/null
expect_status 200

info "auth with CELLA_TOKEN"
stop_cellad
token=tok-$IT_RUN-$RANDOM$RANDOM
CELLA_TOKEN=$token start_cellad
unset CELLA_TOKEN
api GET /v1/health >/dev/null
expect_status 200
api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED
api_json POST "/v1/sandboxes/$(sbx auth)/exec" '{"command":"true"}'
expect_status 401 UNAUTHORIZED
api GET /v1/sandboxes -H "Authorization: Bearer wrong-$token" >/dev/null
expect_status 401 UNAUTHORIZED
api GET "/v1/sandboxes/$(sbx auth)" -H "Authorization: Bearer $token" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
export CELLA_TOKEN=$token
assert_eq hi "$(run_in "$(sbx auth)" 'echo hi')" "exec with the token"
# The cellad listening here is the one with the token; the trap stops it (with the token).
