#!/usr/bin/env bash
# Tenants and API keys (docs/tenants.md, decision 0053): two tenants' keys each make "web"
# and see only their own (list, get, exec, files, a terminal WebSocket, snapshots, fork and
# fromSnapshot, preview URLs: the other's host cannot be guessed); another tenant's sandbox
# or snapshot is 404 as an absent one; the admin sees all, each with its tenant, and acts
# for one with ?tenant=; admin-only routes refuse a tenant's key; quotas refuse with 403
# QUOTA_EXCEEDED and make nothing, and creates racing for the last slots make no more than
# the quota; a removed key is refused at once; keys outlive a restart; the CLI's key
# commands; backups are per tenant as snapshots are.
. "$(dirname "$0")/lib.sh"

PC=$CELLA_BUILD/tests/pty-client
CLI=$CELLA_BUILD/cella
[ -x "$PC" ] || skip "no $PC"
ADMIN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
CELLA_TOKEN=$ADMIN start_cellad
export CELLA_TOKEN=$ADMIN

TA=a$IT_RUN
TB=b$IT_RUN
as() { # as KEY FUNCTION ARGS...: the function with KEY as the bearer token
        local k=$1
        shift
        CELLA_TOKEN=$k "$@"
}

info "keys: admin only, validated, the secret shown once"
api_json POST /v1/keys "{\"tenant\":\"$TA\"}"
expect_status 201
KA=$(body .key)
IDA=$(body .id)
assert_eq "$TA" "$(body .tenant)" "key tenant"
assert_eq 0 "$(body .maxSandboxes)" "no limit"
[[ $KA =~ ^cella_[0-9a-f]{12}_[A-Za-z0-9]{32}$ ]] || fail "key shape: $KA"
assert_eq "cella_${IDA}_" "${KA:0:19}" "the key carries its id"
api_json POST /v1/keys "{\"tenant\":\"$TB\",\"maxSandboxes\":3}"
expect_status 201
KB=$(body .key)
IDB=$(body .id)
api_json POST /v1/keys '{"tenant":"Bad-Tenant"}'
expect_status 400 VALIDATION_FAILED
api_json POST /v1/keys "{\"tenant\":\"$TA\",\"maxSandboxes\":-1}"
expect_status 400 VALIDATION_FAILED
api_json POST /v1/keys "{\"tenant\":\"$TA\",\"bogus\":1}"
expect_status 400 VALIDATION_FAILED
api GET /v1/keys >/dev/null
expect_status 200
assert_eq 2 "$(body '.keys | length')" "two keys listed"
assert_not_contains "$(body)" "${KA:19}" "GET /v1/keys never shows a secret"
assert_not_contains "$(cat "$IT_TMP/data/cella.db" "$IT_TMP"/data/cella.db-wal 2>/dev/null | tr -d '\0')" \
        "${KA:19}" "the registry holds no secret"
api DELETE /v1/keys/000000000000 >/dev/null
expect_status 404 KEY_NOT_FOUND
api DELETE /v1/keys/nothex >/dev/null
expect_status 404 KEY_NOT_FOUND
as "$KA" api GET /v1/keys >/dev/null
expect_status 403 PERMISSION_DENIED
as "$KA" api_json POST /v1/keys "{\"tenant\":\"$TA\"}"
expect_status 403 PERMISSION_DENIED
as "$KA" api GET /metrics >/dev/null
expect_status 403 PERMISSION_DENIED
as "$KA" api POST /v1/images/x/import --data-binary @/dev/null >/dev/null
expect_status 403 PERMISSION_DENIED
as "$KA" api GET /v1/images >/dev/null
expect_status 200
as "cella_${IDA}_$(printf 'x%.0s' $(seq 32))" api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED

info "each tenant's web is its own"
as "$KA" api_json PUT /v1/sandboxes/web '{"labels":{"who":"a"}}'
expect_status 201
assert_eq web "$(body .id)" "a tenant sees its own name"
assert_eq "$TA" "$(body .tenant)" "and its tenant"
as "$KB" api_json PUT /v1/sandboxes/web '{"labels":{"who":"b"}}'
expect_status 201
assert_eq b "$(body .labels.who)" "B's web is a new one"
api_json PUT /v1/sandboxes/web '{"labels":{"who":"admin"}}'
expect_status 201
assert_eq null "$(body .tenant)" "the admin's sandbox has no tenant"
assert_eq a "$(as "$KA" run_in web 'echo a > /workspace/who; hostname >/dev/null; cat /workspace/who')" "exec A"
assert_eq b "$(as "$KB" run_in web 'echo b > /workspace/who; cat /workspace/who')" "exec B"
assert_eq admin "$(run_in web 'echo admin > /workspace/who; cat /workspace/who')" "exec admin"
assert_eq a "$(as "$KA" run_in web 'cat /workspace/who')" "A still reads its own file"
as "$KB" api GET "/v1/sandboxes/web/files?path=/workspace/who" >/dev/null
expect_status 200
assert_eq b "$(body | tr -d '\n')" "files API: B's own file"
as "$KB" api_json POST /v1/sandboxes/web/files/write '{"path":"/workspace/f","content":"from-b"}'
expect_status 200
as "$KA" api GET "/v1/sandboxes/web/files?path=/workspace/f" >/dev/null
expect_status 404 FILE_NOT_FOUND

info "another tenant's sandbox is 404 as an absent one"
as "$KB" api_json PUT /v1/sandboxes/bonly '{}'
expect_status 201
as "$KA" api GET /v1/sandboxes/bonly >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KA" api GET /v1/sandboxes/nothing >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KA" api GET /v1/sandboxes/bonly/files/list?path=/ >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KA" api DELETE /v1/sandboxes/bonly >/dev/null
expect_status 200
assert_eq false "$(body .destroyed)" "A's delete of B's name destroys nothing"
as "$KA" api POST /v1/sandboxes/bonly/sleep >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KB" api GET /v1/sandboxes/bonly >/dev/null
expect_status 200
assert_eq running "$(body .state)" "A's sleep of B's name sleeps nothing"
as "$KA" api POST /v1/sandboxes/web/sleep >/dev/null
expect_status 200
assert_eq sleeping "$(body .state)" "A's sleep of its own web"
assert_eq "$TA" "$(body .tenant)" "answered as A sees it"
as "$KB" api GET /v1/sandboxes/web >/dev/null
assert_eq running "$(body .state)" "B's web runs on"
assert_eq a "$(as "$KA" run_in web 'cat /workspace/who')" "A's web wakes with its file"
as "$KA" api GET "/v1/sandboxes/web?tenant=$TB" >/dev/null
expect_status 403 PERMISSION_DENIED

info "lists"
as "$KA" api GET /v1/sandboxes >/dev/null
assert_eq "web" "$(body '[.sandboxes[].id] | join(",")')" "A lists its own only"
as "$KB" api GET /v1/sandboxes >/dev/null
assert_eq "bonly,web" "$(body '[.sandboxes[].id] | sort | join(",")')" "B lists its own only"
api GET /v1/sandboxes >/dev/null
assert_eq ":web,$TA:web,$TB:bonly,$TB:web" \
        "$(body '[.sandboxes[] | "\(.tenant // ""):\(.id)"] | sort | join(",")')" \
        "the admin lists every tenant's, each with its tenant"
api GET "/v1/sandboxes?tenant=$TA" >/dev/null
assert_eq "web $TA" "$(body '.sandboxes[] | "\(.id) \(.tenant)"')" "the admin lists one tenant's"
api_json POST "/v1/sandboxes/web/exec?tenant=$TA" '{"command":"cat /workspace/who"}'
expect_status 200
assert_eq a "$(body .stdout | tr -d '\n')" "the admin acts for a tenant"
api GET "/v1/sandboxes/web?tenant=$TA" >/dev/null
expect_status 200
assert_eq a "$(body .labels.who)" "the admin reaches A's web with ?tenant="

info "MCP with a tenant's key: its tools act for that tenant"
mcp_line() { # mcp_line ID TOOL ARGS: a tools/call line
        echo "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
{
        echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tenants","version":"1"}}}'
        echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
        mcp_line 2 sandbox_list '{}'
        mcp_line 3 sandbox_create '{"name":"viamcp"}'
        mcp_line 4 snapshot_create '{"sandbox":"ghost"}'
} | CELLA_TOKEN=$KA timeout 60 "$CLI" mcp >"$IT_TMP/mcp" || fail "cella mcp: $(cat "$IT_TMP/mcp")"
got=$(jq -r 'select(.id == 2) | .result.content[0].text' "$IT_TMP/mcp")
assert_contains "$got" '"web"' "MCP sandbox_list: A's web"
assert_not_contains "$got" bonly "MCP sandbox_list: nothing of B's"
got=$(jq -c 'select(.id == 4) | .result' "$IT_TMP/mcp")
assert_eq true "$(echo "$got" | jq -r .isError)" "MCP snapshot_create of no sandbox: a tool error"
assert_contains "$got" "'ghost'" "the tool error names the sandbox"
assert_not_contains "$got" ".$TA" "as the tenant names it"
as "$KA" api GET /v1/sandboxes/viamcp >/dev/null
expect_status 200
assert_eq "$TA" "$(body .tenant)" "MCP sandbox_create made A's"
as "$KB" api GET /v1/sandboxes/viamcp >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KA" api DELETE /v1/sandboxes/viamcp >/dev/null
expect_status 200

info "terminal WebSocket"
CELLA_TOKEN=$KA "$PC" --url "$CELLA_URL" --token "$KA" --timeout 60 web ready \
        'send:echo X$(cat /workspace/who)Y\r' expect:XaY 'send:exit\r' exit:0 ||
        fail "A's terminal"
CELLA_TOKEN=$KB "$PC" --url "$CELLA_URL" --token "$KB" --timeout 60 web ready \
        'send:echo X$(cat /workspace/who)Y\r' expect:XbY 'send:exit\r' exit:0 ||
        fail "B's terminal"

info "preview URLs: the token decides, the other tenant's host cannot be guessed"
for t in A B; do
        k=KA
        [ $t = B ] && k=KB
        as "${!k}" sx web "nohup python3 -m http.server 8000 --directory /workspace >/dev/null 2>&1 &"
        expect_status 200
done
for i in $(seq 1 100); do
        as "$KA" sx web 'python3 -c "import urllib.request;urllib.request.urlopen(\"http://127.0.0.1:8000/who\")"'
        [ "$(body .exitCode)" = 0 ] && break
        sleep 0.2
done
for i in $(seq 1 100); do
        as "$KB" sx web 'python3 -c "import urllib.request;urllib.request.urlopen(\"http://127.0.0.1:8000/who\")"'
        [ "$(body .exitCode)" = 0 ] && break
        sleep 0.2
done
as "$KA" api_json POST /v1/sandboxes/web/ports '{"port":8000}'
expect_status 201
UA=$(body .url)
as "$KB" api_json POST /v1/sandboxes/web/ports '{"port":8000}'
expect_status 201
UB=$(body .url)
HOSTPORT=${CELLA_URL#http://}
DPORT=${HOSTPORT##*:}
TOKA=$(echo "$UA" | sed -E "s#^http://8000-web--$TA-([a-z0-9_]+)\.localhost:$DPORT/\$#\1#")
TOKB=$(echo "$UB" | sed -E "s#^http://8000-web--$TB-([a-z0-9_]+)\.localhost:$DPORT/\$#\1#")
assert_eq 16 "${#TOKA}" "A's preview host names its tenant ($UA)"
assert_eq 16 "${#TOKB}" "B's preview host names its tenant ($UB)"
pv() { # pv HOST: GET /who through the preview host, status printed, body in $IT_TMP/pv
        curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: $1.localhost:$DPORT" "$CELLA_URL/who"
}
assert_eq 200 "$(pv "8000-web--$TA-$TOKA")" "A's URL"
assert_eq a "$(tr -d '\n' <"$IT_TMP/pv")" "A's URL reaches A's web"
assert_eq 200 "$(pv "8000-web--$TB-$TOKB")" "B's URL"
assert_eq b "$(tr -d '\n' <"$IT_TMP/pv")" "B's URL reaches B's web"
assert_eq 404 "$(pv "8000-web--$TA-$TOKB")" "B's token on A's host"
assert_eq 404 "$(pv "8000-web-$TOKA")" "A's token on the default tenant's web"
assert_eq 404 "$(pv "8000-web--$TB-$TOKA")" "A's token on B's host"

info "snapshots are per tenant"
as "$KA" api_json POST /v1/sandboxes/web/snapshots '{"name":"base"}'
expect_status 201
SA=$(body .snapshotId)
assert_eq base "$(body .name)" "A's snapshot name"
assert_eq web "$(body .sandbox)" "A's snapshot's sandbox"
as "$KB" api_json POST /v1/sandboxes/web/snapshots '{"name":"base"}'
expect_status 201
SB=$(body .snapshotId)
assert_ne "$SA" "$SB" "two snapshots named base"
as "$KA" api GET /v1/snapshots >/dev/null
assert_eq "$SA" "$(body '[.snapshots[].snapshotId] | join(",")')" "A lists its own snapshots"
as "$KA" api GET /v1/snapshots/base >/dev/null
expect_status 200
assert_eq "$SA" "$(body .snapshotId)" "A's base is A's"
as "$KB" api GET /v1/snapshots/base >/dev/null
assert_eq "$SB" "$(body .snapshotId)" "B's base is B's"
as "$KB" api GET "/v1/snapshots/$SA" >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
as "$KB" api DELETE "/v1/snapshots/$SA" >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
as "$KB" api_json PUT /v1/sandboxes/stolen "{\"fromSnapshot\":\"$SA\"}"
expect_status 404 SNAPSHOT_NOT_FOUND
as "$KB" api GET /v1/sandboxes/stolen >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
as "$KA" api_json PUT /v1/sandboxes/child '{"fromSnapshot":"base"}'
expect_status 201
assert_eq a "$(as "$KA" run_in child 'cat /workspace/who')" "A's child from A's base"
as "$KA" api_json POST /v1/sandboxes/web/fork '{"name":"forked"}'
expect_status 201
assert_eq "$TA" "$(body .tenant)" "a fork is the same tenant's"
assert_eq a "$(as "$KA" run_in forked 'cat /workspace/who')" "A's fork of A's web"
api GET /v1/snapshots >/dev/null
assert_eq 3 "$(body '[.snapshots[] | select(.tenant)] | length')" "the admin lists the tenants' snapshots"
for s in forked child; do
        as "$KA" api DELETE /v1/sandboxes/$s >/dev/null
        expect_status 200
done

info "messages name a tenant's sandboxes and snapshots as the tenant does"
public() { # public WHAT: the last answer names no internal name of A's
        assert_not_contains "$(body)" ".$TA" "$1: no internal sandbox name"
        assert_not_contains "$(body)" ":$TA" "$1: no internal snapshot name"
}
as "$KA" api GET /v1/sandboxes/nothing >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
assert_contains "$(body .message)" "'nothing'" "a 404 names the sandbox"
public "a sandbox's 404"
as "$KA" api GET /v1/snapshots/nosnap >/dev/null
expect_status 404 SNAPSHOT_NOT_FOUND
public "a snapshot's 404"
as "$KA" api_json POST /v1/sandboxes/nothing/backups '{"dir":"/workspace"}'
expect_status 404 SANDBOX_NOT_FOUND
assert_contains "$(body .message)" "'nothing'" "a backup's 404 names the sandbox"
public "a backup's 404"
as "$KA" api_json PUT /v1/sandboxes/kid '{"fromSnapshot":"base"}'
expect_status 201
as "$KA" api DELETE /v1/snapshots/base >/dev/null
expect_status 409 SNAPSHOT_IN_USE
public "a snapshot's 409"
as "$KA" api_json POST /v1/sandboxes/web/fork '{"name":"kid"}'
expect_status 400 VALIDATION_FAILED
public "a fork onto a name in use"
as "$KA" api_json POST /v1/sandboxes/web/snapshots '{"name":"base"}'
[ "$API_STATUS" -ge 400 ] || fail "a second snapshot named base: $API_STATUS"
public "a snapshot name in use"
as "$KA" api_json POST /v1/sandboxes/kid/exec '{"command":"sleep 5","timeout":100}'
expect_status 408 COMMAND_TIMEOUT
public "an exec's timeout"
as "$KA" api_json POST /v1/sandboxes/kid/exec '{"command":"true","sessionId":"nosuch"}'
[ "$API_STATUS" -ge 400 ] || fail "an exec in no session: $API_STATUS"
public "an exec in no session"
as "$KA" api DELETE /v1/sandboxes/kid >/dev/null
expect_status 200
api GET /v1/sandboxes/nothing >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "backups are per tenant"
as "$KA" api_json POST /v1/sandboxes/web/backups '{"dir":"/workspace","name":"a-work"}'
expect_status 201
BA=$(body .id)
assert_eq web "$(body .sandbox)" "A's backup names A's sandbox as A names it"
assert_eq "$TA" "$(body .tenant)" "and its tenant"
assert_contains "$(cat "$IT_TMP/data/backups/$BA/backup.json")" "\"web.$TA\"" \
        "the store's record keeps the internal name (a shared store knows the tenant)"
as "$KB" api_json POST /v1/sandboxes/web/backups '{"dir":"/workspace"}'
expect_status 201
BB=$(body .id)
api_json POST /v1/sandboxes/web/backups '{"dir":"/workspace"}'
expect_status 201
BADM=$(body .id)
assert_eq null "$(body .tenant)" "the admin's backup has no tenant"
as "$KA" api GET /v1/backups >/dev/null
expect_status 200
assert_eq "$BA web $TA" "$(body '.backups[] | "\(.id) \(.sandbox) \(.tenant)"')" "A lists its own backup only"
as "$KB" api GET /v1/backups >/dev/null
assert_eq "$BB" "$(body '[.backups[].id] | join(",")')" "B lists its own backup only"
api GET /v1/backups >/dev/null
assert_eq "$(printf '%s\n' ":$BADM" "$TA:$BA" "$TB:$BB" | sort | paste -sd,)" \
        "$(body '[.backups[] | "\(.tenant // ""):\(.id)"] | sort | join(",")')" \
        "the admin lists every tenant's backups, each with its tenant"
api GET "/v1/backups/$BA" >/dev/null
expect_status 200
assert_eq "web $TA" "$(body '"\(.sandbox) \(.tenant)"')" "the admin gets A's backup"
NOBK=00000000-0000-4000-8000-000000000000
as "$KB" api GET "/v1/backups/$NOBK" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
absent=$(body .message | sed "s/$NOBK/ID/")
as "$KB" api GET "/v1/backups/$BA" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
assert_eq "$absent" "$(body .message | sed "s/$BA/ID/")" "A's backup answers B as an absent one"
as "$KB" api_json POST "/v1/sandboxes/web/backups/$BA/restore" '{}'
expect_status 404 BACKUP_NOT_FOUND
assert_eq "$absent" "$(body .message | sed "s/$BA/ID/")" "B cannot restore A's backup"
as "$KB" api DELETE "/v1/backups/$BA" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
as "$KB" api_json POST "/v1/sandboxes/web/backups/$BB/restore?tenant=$TA" '{}'
expect_status 403 PERMISSION_DENIED
assert_eq b "$(as "$KB" run_in web 'cat /workspace/who')" "B's web untouched"
assert_eq a "$(as "$KA" run_in web 'cat /workspace/who; echo changed > /workspace/who')" "A's web untouched"
as "$KA" api_json POST "/v1/sandboxes/web/backups/$BA/restore" '{}'
expect_status 200
assert_eq web "$(body .sandbox)" "a restore's answer names A's sandbox as A names it"
assert_eq a "$(as "$KA" run_in web 'cat /workspace/who')" "A restores its own backup"
as "$KA" api DELETE "/v1/backups/$BA" >/dev/null
expect_status 200
as "$KA" api DELETE "/v1/backups/$BB" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
api DELETE "/v1/backups/$BB" >/dev/null
expect_status 200
api DELETE "/v1/backups/$BADM" >/dev/null
expect_status 200

info "quotas"
as "$KB" api_json PUT /v1/sandboxes/third '{}'
expect_status 201
as "$KB" api_json PUT /v1/sandboxes/fourth '{}'
expect_status 403 QUOTA_EXCEEDED
as "$KB" sx fourth 'true'
expect_status 403 QUOTA_EXCEEDED
as "$KB" api_json POST /v1/sandboxes/web/fork '{"name":"fourth"}'
expect_status 403 QUOTA_EXCEEDED
as "$KB" api GET /v1/sandboxes >/dev/null
assert_eq 3 "$(body '.sandboxes | length')" "nothing made past maxSandboxes"

info "quotas: ten creates (or forks) racing for three slots make three"
api_json POST /v1/keys "{\"tenant\":\"f$IT_RUN\",\"maxSandboxes\":3}"
expect_status 201
KF=$(body .key)
IDF=$(body .id)
pids=()
for i in $(seq 0 9); do
        curl -sS -o "$IT_TMP/race$i" -w '%{http_code}' -X PUT -H "Authorization: Bearer $KF" \
                -H 'Content-Type: application/json' --data-binary '{}' \
                "$CELLA_URL/v1/sandboxes/race$i" >"$IT_TMP/race$i.status" &
        pids+=($!)
done
for p in "${pids[@]}"; do
        wait "$p" || fail "a racing create's curl failed"
done
made=0 refused=0
for i in $(seq 0 9); do
        case "$(cat "$IT_TMP/race$i.status")" in
        201) made=$((made + 1)) ;;
        403)
                assert_eq QUOTA_EXCEEDED "$(jq -r .code <"$IT_TMP/race$i")" "a refused racer's code"
                refused=$((refused + 1))
                ;;
        *) fail "racer $i: $(cat "$IT_TMP/race$i.status") $(cat "$IT_TMP/race$i")" ;;
        esac
done
assert_eq "3 7" "$made $refused" "ten racing creates with maxSandboxes 3: three made, seven refused"
as "$KF" api GET /v1/sandboxes >/dev/null
assert_eq 3 "$(body '.sandboxes | length')" "three sandboxes exist"
gone=$(body '.sandboxes[0].id')
as "$KF" api DELETE "/v1/sandboxes/$gone" >/dev/null
expect_status 200
as "$KF" api_json PUT /v1/sandboxes/late '{"fromSnapshot":"nothing"}'
expect_status 404 SNAPSHOT_NOT_FOUND
as "$KF" api_json PUT /v1/sandboxes/late '{"image":"no-such-image"}'
[ "$API_STATUS" -ge 400 ] || fail "a create from no image: $API_STATUS"
as "$KF" api_json PUT /v1/sandboxes/late '{}'
expect_status 201 # the failed creates held the slot no longer
as "$KF" api_json PUT /v1/sandboxes/later '{}'
expect_status 403 QUOTA_EXCEEDED
as "$KF" api GET /v1/sandboxes >/dev/null
for s in $(body '.sandboxes[].id'); do
        [ "$s" = late ] && continue
        as "$KF" api DELETE "/v1/sandboxes/$s" >/dev/null
        expect_status 200
done
# forks: the check comes before the parent's snapshot is taken, the child after it
as "$KF" api_json PUT /v1/sandboxes/second '{}'
expect_status 201
pids=()
for i in $(seq 0 9); do
        curl -sS -o "$IT_TMP/race$i" -w '%{http_code}' -X POST -H "Authorization: Bearer $KF" \
                -H 'Content-Type: application/json' --data-binary "{\"name\":\"fork$i\"}" \
                "$CELLA_URL/v1/sandboxes/late/fork" >"$IT_TMP/race$i.status" &
        pids+=($!)
done
for p in "${pids[@]}"; do
        wait "$p" || fail "a racing fork's curl failed"
done
made=0 refused=0
for i in $(seq 0 9); do
        case "$(cat "$IT_TMP/race$i.status")" in
        201) made=$((made + 1)) ;;
        403)
                assert_eq QUOTA_EXCEEDED "$(jq -r .code <"$IT_TMP/race$i")" "a refused fork's code"
                refused=$((refused + 1))
                ;;
        *) fail "fork $i: $(cat "$IT_TMP/race$i.status") $(cat "$IT_TMP/race$i")" ;;
        esac
done
assert_eq "1 9" "$made $refused" "ten racing forks for the last slot: one made"
as "$KF" api GET /v1/sandboxes >/dev/null
assert_eq 3 "$(body '.sandboxes | length')" "three sandboxes exist after the forks"
for s in $(body '.sandboxes[].id'); do
        as "$KF" api DELETE "/v1/sandboxes/$s" >/dev/null
        expect_status 200
done
api DELETE "/v1/keys/$IDF" >/dev/null
expect_status 200

api_json POST /v1/keys "{\"tenant\":\"c$IT_RUN\",\"maxMemory\":1048576}"
expect_status 201
KC=$(body .key)
IDC=$(body .id)
as "$KC" api_json PUT /v1/sandboxes/big '{}'
expect_status 403 QUOTA_EXCEEDED
as "$KC" sx big 'true'
expect_status 403 QUOTA_EXCEEDED
as "$KC" api GET /v1/sandboxes >/dev/null
assert_eq 0 "$(body '.sandboxes | length')" "nothing made past maxMemory"

info "maxMemory counts running sandboxes: a wake is checked too"
api_json POST /v1/keys "{\"tenant\":\"e$IT_RUN\",\"maxMemory\":$((256 * 1024 * 1024))}"
expect_status 201
KE=$(body .key)
IDE=$(body .id)
as "$KE" api_json PUT /v1/sandboxes/one '{"instanceType":"lite","sleepAfter":1}'
expect_status 201
as "$KE" api_json PUT /v1/sandboxes/two '{"instanceType":"lite","sleepAfter":1}'
expect_status 403 QUOTA_EXCEEDED
for i in $(seq 1 150); do # one sleeps after 1 s idle: it holds no memory then
        as "$KE" api GET /v1/sandboxes/one >/dev/null
        [ "$(body .state)" = sleeping ] && break
        sleep 0.2
done
assert_eq sleeping "$(body .state)" "one sleeps"
as "$KE" api_json PUT /v1/sandboxes/two '{"instanceType":"lite","keepAlive":true}'
expect_status 201
as "$KE" sx one 'true'
expect_status 403 QUOTA_EXCEEDED
as "$KE" api GET /v1/sandboxes/one >/dev/null
assert_eq sleeping "$(body .state)" "a wake past maxMemory wakes nothing"
as "$KE" api DELETE /v1/sandboxes/two >/dev/null
expect_status 200
assert_eq 0 "$(as "$KE" run_in one 'echo $?')" "once two is gone, one wakes"
for s in one; do
        as "$KE" api DELETE /v1/sandboxes/$s >/dev/null
done
api DELETE "/v1/keys/$IDE" >/dev/null
expect_status 200

info "a removed key is refused at once"
api DELETE "/v1/keys/$IDB" >/dev/null
expect_status 200
as "$KB" api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED
as "$KB" sx web 'true'
expect_status 401 UNAUTHORIZED
api GET "/v1/sandboxes/web?tenant=$TB" >/dev/null
expect_status 200

info "the CLI"
out=$("$CLI" key create --tenant "d$IT_RUN" --max-sandboxes 2 --max-memory 2G)
assert_contains "$out" "cella_" "cella key create prints the key"
"$CLI" key ls >"$IT_TMP/ls"
assert_contains "$(cat "$IT_TMP/ls")" "d$IT_RUN" "cella key ls"
IDD=$("$CLI" --json key ls | jq -r ".keys[] | select(.tenant == \"d$IT_RUN\") | .id")
assert_eq 2147483648 "$("$CLI" --json key ls | jq -r ".keys[] | select(.id == \"$IDD\") | .maxMemory")" "--max-memory 2G"
"$CLI" key rm "$IDD" >/dev/null
api GET /v1/keys >/dev/null
assert_eq "" "$(body ".keys[] | select(.id == \"$IDD\") | .id")" "cella key rm"
CELLA_TOKEN=$KA "$CLI" ls >"$IT_TMP/ls"
assert_contains "$(cat "$IT_TMP/ls")" "web" "the CLI with a tenant's key"

info "a restart (SIGKILL) keeps the keys and the tenants' sandboxes"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
CELLA_TOKEN=$ADMIN start_cellad
as "$KA" api GET /v1/sandboxes >/dev/null
expect_status 200
assert_eq "web $TA" "$(body '.sandboxes[] | "\(.id) \(.tenant)"')" "A's sandboxes after a restart"
assert_eq a "$(as "$KA" run_in web 'cat /workspace/who')" "A's web after a restart"
as "$KB" api GET /v1/sandboxes >/dev/null
expect_status 401 UNAUTHORIZED
api GET /v1/keys >/dev/null
assert_eq "$IDA,$IDC" "$(body '[.keys[].id] | join(",")')" "the keys after a restart"

info "a registry rebuilt from the identity files keeps the tenants' sandboxes and snapshots"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
rm -f "$IT_TMP/data/cella.db" "$IT_TMP/data/cella.db-wal" "$IT_TMP/data/cella.db-shm"
CELLA_TOKEN=$ADMIN start_cellad
api GET /v1/sandboxes >/dev/null
assert_eq ":web,$TA:web,$TB:bonly,$TB:third,$TB:web" \
        "$(body '[.sandboxes[] | "\(.tenant // ""):\(.id)"] | sort | join(",")')" \
        "every tenant's sandbox rebuilt"
api GET /v1/snapshots >/dev/null
assert_eq "$TA:base:web,$TB:base:web" \
        "$(body '[.snapshots[] | select(.tenant) | select(.name | startswith("snap-") | not) |
                "\(.tenant):\(.name):\(.sandbox)"] | sort | join(",")')" \
        "the tenants' snapshots rebuilt with their names"
assert_eq 1 "$(body "[.snapshots[] | select(.tenant == \"$TA\") | select(.name | startswith(\"snap-\"))] | length")" \
        "A's fork's snapshot rebuilt as A's"
# keys live in the registry alone (decision 0053): a lost registry loses them
api GET /v1/keys >/dev/null
assert_eq 0 "$(body '.keys | length')" "no key survives a lost registry"
info "ok"
