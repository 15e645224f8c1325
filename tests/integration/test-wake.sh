#!/bin/bash
# A sandbox starts again whatever it did to its own files (decision 0032): each case breaks
# something from inside, lets the sandbox sleep, wakes it with an exec and checks that it
# answers. Commands whose default cwd /workspace cannot be entered run in /.
. "$(dirname "$0")/lib.sh"
start_cellad

# case_ NAME BREAK [EXPECTED_PWD]: a sandbox, broken by the command BREAK (which must
# succeed), asleep, then woken by an exec that must answer.
case_() {
        local name=$1 brk=$2 want_pwd=${3:-/workspace} s
        s=$(sbx "$name")
        info "$name: $brk"
        api_json PUT "/v1/sandboxes/$s" '{"sleepAfter":1}'
        expect_status 201
        sx "$s" "$brk"
        expect_status 200
        assert_eq 0 "$(exit_code)" "$name: the breaking command failed: $(body .stderr)"
        wait_sleeping "$s"
        sx "$s" 'echo alive; pwd'
        expect_status 200
        assert_eq "alive
$want_pwd" "$(jq -r .stdout <"$IT_TMP/body" | head -c 200)" "$name: exec after wake"
        api GET "/v1/sandboxes/$s" >/dev/null
        assert_eq running "$(body .state)" "$name: state after wake"
}

case_ ws-dangling 'rm -rf /workspace && ln -s /nonexistent /workspace' /
case_ ws-proc-root 'rm -rf /workspace && ln -s /proc/self/root /workspace' /workspace
case_ ws-file 'rm -rf /workspace && echo x >/workspace' /
case_ ws-gone 'cd / && rm -rf /workspace' /
case_ ws-000 'chmod 000 /workspace' /workspace
case_ no-bash 'rm -f /bin/bash /usr/bin/bash'
case_ passwd 'head -c 4096 /dev/urandom >/etc/passwd; cp /etc/passwd /etc/group'
case_ etc-dangling 'rm -rf /etc && ln -s /nonexistent /etc'
case_ hosts-dir 'rm -f /etc/hosts /etc/hostname && mkdir /etc/hosts /etc/hostname'
case_ run-cella 'rm -rf /run/cella && ln -s /nonexistent /run/cella'

# /run, /proc, /dev are mounts the sandbox cannot take away (their upper-layer
# directories are never seen from inside); /tmp is a directory of its own files, made
# again at a start when it is not one: a symlink or file planted under them in the upper
# layer is covered by unit/test-runtime-live.
s=$(sbx mounts)
sx "$s" 'umount -l /run || umount -l /dev'
expect_status 200
assert_ne 0 "$(exit_code)" "a sandbox unmounted its /run or /dev"
case_ tmp-symlink 'rm -rf /tmp && ln -s /nonexistent /tmp'
assert_eq "1777 ok" "$(run_in "$(sbx tmp-symlink)" 'echo ok >/tmp/t && echo "$(stat -c %a /tmp) $(cat /tmp/t)"')" \
        "/tmp a directory again after a start"

info "a process with the default cwd says where it runs; a given cwd still fails"
s=$(sbx ws-dangling)
api_json POST "/v1/sandboxes/$s/processes" '{"command":"pwd","processId":"p1"}'
expect_status 200
api_json POST "/v1/sandboxes/$s/processes/p1/waitForExit" '{"timeout":30000}'
expect_status 200
api GET "/v1/sandboxes/$s/processes/p1/logs" >/dev/null
assert_eq / "$(body .stdout | tr -d '\n')" "process cwd"
assert_contains "$(body .stderr)" "cella: cannot enter /workspace: it does not exist; running in /"
api_json POST "/v1/sandboxes/$s/processes" '{"command":"pwd","processId":"p2","cwd":"/nope"}'
api GET "/v1/sandboxes/$s/processes/p2" >/dev/null
assert_eq error "$(body .status)" "a given cwd that does not exist"
info "repaired by the tenant"
run_in "$s" 'rm /workspace && mkdir /workspace' >/dev/null
sx "$s" 'true'
api_json PUT "/v1/sandboxes/$s" '{"sleepAfter":1}'
wait_sleeping "$s"
assert_eq /workspace "$(run_in "$s" pwd)" "after repair and wake"
info "wake: ok"
