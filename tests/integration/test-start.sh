#!/bin/bash
# Starting a sandbox (decision 0041): PUT of a new name starts its container off the event
# loop and answers when it runs; first uses of one name that arrive together make one
# sandbox whichever comes first; a DELETE that meets a start in progress waits for it, so
# PUT and DELETE agree on what happened; other sandboxes are served meanwhile.
. "$(dirname "$0")/lib.sh"
start_cellad --pool 0

# req NAME METHOD PATH [JSON]: a request in the background (its pid joins REQS); status in
# $IT_TMP/NAME.status, body in $IT_TMP/NAME.body. wait_reqs waits for them (not for cellad).
REQS=
req() {
        local name=$1 method=$2 path=$3 auth=()
        [ -n "${CELLA_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $CELLA_TOKEN")
        if [ $# -ge 4 ]; then
                curl -sS -o "$IT_TMP/$name.body" -w '%{http_code}' -X "$method" "${auth[@]}" \
                        -H 'Content-Type: application/json' --data-binary "$4" \
                        "$CELLA_URL$path" >"$IT_TMP/$name.status" &
        else
                curl -sS -o "$IT_TMP/$name.body" -w '%{http_code}' -X "$method" "${auth[@]}" \
                        "$CELLA_URL$path" >"$IT_TMP/$name.status" &
        fi
        REQS="$REQS $!"
}
wait_reqs() {
        local p
        for p in $REQS; do
                wait "$p" || true
        done
        REQS=
}
status_of() { cat "$IT_TMP/$1.status"; }
field_of() { jq -r "$2" <"$IT_TMP/$1.body"; }

O=$(sbx other)
assert_eq hi "$(run_in "$O" 'echo hi')" "a running sandbox"

info "PUT, two execs and an exec in another sandbox at once"
S=$(sbx once)
exec_req=$(jq -cn '{command:"echo $HOSTNAME"}')
req put PUT "/v1/sandboxes/$S" '{"labels":{"k":"v"}}'
req e1 POST "/v1/sandboxes/$S/exec" "$exec_req"
req e2 POST "/v1/sandboxes/$S/exec" "$exec_req"
req other POST "/v1/sandboxes/$O/exec" "$exec_req"
wait_reqs
case "$(status_of put)" in
201 | 200) ;;
*) fail "PUT: $(status_of put) $(cat "$IT_TMP/put.body")" ;;
esac
for e in e1 e2; do
        assert_eq 200 "$(status_of $e)" "$e: $(cat "$IT_TMP/$e.body")"
        assert_eq "$S" "$(field_of $e .stdout | tr -d '\n')" "$e ran in the sandbox"
done
assert_eq 200 "$(status_of other)" "the other sandbox was served"
assert_eq "$O" "$(field_of other .stdout | tr -d '\n')"
api GET /v1/sandboxes >/dev/null
expect_status 200
assert_eq 1 "$(body "[.sandboxes[] | select(.id == \"$S\")] | length")" "one sandbox of the name"
api GET "/v1/sandboxes/$S" >/dev/null
expect_status 200
assert_eq running "$(body .state)"
# Made by PUT (201) or by an exec that came first (PUT then updated it: 200).
assert_eq v "$(body .labels.k)" "PUT's labels"
[ -n "$(sandbox_cgroups "$S")" ] || fail "no cgroup for $S"

info "DELETE while PUT starts a new name: both answers agree with the outcome"
for i in 1 2 3; do
        D=$(sbx del$i)
        req dput PUT "/v1/sandboxes/$D" '{"network":"none"}'
        req ddel DELETE "/v1/sandboxes/$D"
        wait_reqs
        assert_eq 201 "$(status_of dput)" "PUT $D: $(cat "$IT_TMP/dput.body")"
        assert_eq 200 "$(status_of ddel)" "DELETE $D: $(cat "$IT_TMP/ddel.body")"
        api GET "/v1/sandboxes/$D" >/dev/null
        if [ "$(field_of ddel .destroyed)" = true ]; then
                expect_status 404 SANDBOX_NOT_FOUND
        else
                expect_status 200 # DELETE came first: PUT made it afterwards
                api DELETE "/v1/sandboxes/$D" >/dev/null
                expect_status 200
        fi
done

info "a PUT that cannot start answers its error and leaves nothing"
api_json PUT "/v1/sandboxes/$(sbx noimage)" '{"image":"no-such-image"}'
expect_status 404 IMAGE_NOT_FOUND
api GET "/v1/sandboxes/$(sbx noimage)" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "start: ok"
