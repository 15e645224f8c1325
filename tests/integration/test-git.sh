#!/bin/bash
# Git checkout (POST .../git/checkout and `cella git clone`) from repositories served inside
# the sandbox itself, no external network: a bare repository with two branches served over
# git's dumb HTTP protocol (python3 -m http.server) and over git:// (git daemon, for shallow
# clones, which dumb HTTP cannot do); the default branch, --branch, --depth, the default
# and a custom target directory, an existing non-empty directory, every error code
# (repository not found, branch not found, bad URLs, nobody listening, 401), credentials in
# the URL never echoed (answer, errors, cellad's log), the timeout, and the CLI.
. "$(dirname "$0")/lib.sh"
start_cellad
CLI=$CELLA_BUILD/cella
[ -x "$CLI" ] || fail "no $CLI"

S=$(sbx git)
G=/v1/sandboxes/$S/git/checkout
P=/v1/sandboxes/$S/processes

# checkout JSON: POST the checkout, answer in $IT_TMP/body, status in API_STATUS.
checkout() {
        api_json POST "$G" "$1"
}

info "a bare repository with branches main and dev, served over dumb HTTP and git://"
run_in "$S" 'set -e
        mkdir -p /srv/git /tmp/w && cd /tmp/w
        git init -q -b main . && git config user.email t@t && git config user.name t
        echo one >a.txt && git add a.txt && git commit -q -m one
        echo two >>a.txt && git commit -q -am two
        git checkout -q -b dev && echo dev >dev.txt && git add dev.txt && git commit -q -m dev
        git checkout -q main
        git init -q --bare -b main /srv/git/repo.git
        git push -q /srv/git/repo.git main dev
        git -C /srv/git/repo.git update-server-info
        mkdir -p /srv/auth
        cat >/srv/auth.py <<PY
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Basic realm=\"git\"")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY' >/dev/null
api_json POST "$P" '{"command":"python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/git","processId":"http"}'
expect_status 200
api_json POST "$P/http/waitForPort" '{"port":8000,"timeout":30000}'
expect_status 200
api_json POST "$P" '{"command":"git daemon --reuseaddr --listen=127.0.0.1 --port=9418 --base-path=/srv/git --export-all /srv/git","processId":"gitd"}'
expect_status 200
api_json POST "$P/gitd/waitForPort" '{"port":9418,"timeout":30000}'
expect_status 200
api_json POST "$P" '{"command":"python3 /srv/auth.py 8001","processId":"auth"}'
expect_status 200
api_json POST "$P/auth/waitForPort" '{"port":8001,"timeout":30000}'
expect_status 200
URL=http://127.0.0.1:8000/repo.git

info "the default branch into the default directory"
checkout "{\"repoUrl\":\"$URL\"}"
expect_status 200
assert_eq true "$(body .success)" "success"
assert_eq "$URL" "$(body .repoUrl)" "repoUrl"
assert_eq main "$(body .branch)" "default branch"
assert_eq /workspace/repo "$(body .targetDir)" "default targetDir"
assert_eq "one
two" "$(run_in "$S" 'cat /workspace/repo/a.txt')" "checked-out file"
assert_eq main "$(run_in "$S" 'git -C /workspace/repo rev-parse --abbrev-ref HEAD')" "HEAD"

info "the same directory again: not empty"
checkout "{\"repoUrl\":\"$URL\"}"
expect_status 409 DIRECTORY_NOT_EMPTY

info "--branch into a custom relative directory"
checkout "{\"repoUrl\":\"$URL\",\"branch\":\"dev\",\"targetDir\":\"src/dev\"}"
expect_status 200
assert_eq dev "$(body .branch)" "branch"
assert_eq /workspace/src/dev "$(body .targetDir)" "relative targetDir"
assert_eq dev "$(run_in "$S" 'cat /workspace/src/dev/dev.txt')" "dev branch file"

info "an absolute target directory"
checkout "{\"repoUrl\":\"$URL\",\"targetDir\":\"/tmp/abs\"}"
expect_status 200
assert_eq /tmp/abs "$(body .targetDir)" "absolute targetDir"
assert_eq false "$(run_in "$S" 'git -C /tmp/abs rev-parse --is-shallow-repository')" "full clone"

info "--depth 1 over git:// is shallow"
checkout '{"repoUrl":"git://127.0.0.1:9418/repo.git","depth":1,"targetDir":"/tmp/shallow"}'
expect_status 200
assert_eq true "$(run_in "$S" 'git -C /tmp/shallow rev-parse --is-shallow-repository')" "shallow"
assert_eq 1 "$(run_in "$S" 'git -C /tmp/shallow rev-list --count HEAD')" "one commit"
# dumb HTTP cannot fetch shallow: git's own refusal, GIT_CLONE_FAILED with its message
checkout "{\"repoUrl\":\"$URL\",\"depth\":1,\"targetDir\":\"/tmp/dumb-shallow\"}"
expect_status 500 GIT_CLONE_FAILED
assert_contains "$(body .message)" "shallow" "git's message"

info "GIT_REPOSITORY_NOT_FOUND, GIT_BRANCH_NOT_FOUND"
checkout '{"repoUrl":"http://127.0.0.1:8000/nope.git"}'
expect_status 404 GIT_REPOSITORY_NOT_FOUND
checkout "{\"repoUrl\":\"$URL\",\"branch\":\"nope\",\"targetDir\":\"/tmp/nb\"}"
expect_status 404 GIT_BRANCH_NOT_FOUND
assert_eq no "$(run_in "$S" '[ -e /tmp/nb ] && echo yes || echo no')" "nothing left behind"

info "INVALID_GIT_URL"
for u in 'file:///srv/git/repo.git' '/srv/git/repo.git' '-uhttp://x/y' '--upload-pack=touch /tmp/pwned' \
        'http://127.0.0.1:8000/repo.git; touch /tmp/pwned' 'http://127.0.0.1:8000/$(touch /tmp/pwned)' \
        'ext::sh -c touch% /tmp/pwned' 'ftp://host/repo' 'http:///repo' 'https://host' ''; do
        checkout "$(jq -cn --arg u "$u" '{repoUrl: $u}')"
        expect_status 400 INVALID_GIT_URL
done
checkout '{"repoUrl":"http://127.0.0.1:8000/repo.git\nx"}'
expect_status 400 INVALID_GIT_URL
checkout '{"repoUrl":5}'
expect_status 400 INVALID_GIT_URL
assert_eq no "$(run_in "$S" '[ -e /tmp/pwned ] && echo yes || echo no')" "no injection"
for b in '-b' '--upload-pack=x' 'a..b' 'a b' 'x:y' 'a\\b'; do
        checkout "$(jq -cn --arg u "$URL" --arg b "$b" '{repoUrl: $u, branch: $b, targetDir: "/tmp/x"}')"
        expect_status 400 VALIDATION_FAILED
done
checkout "{\"repoUrl\":\"$URL\",\"depth\":-1}"
expect_status 400 VALIDATION_FAILED
checkout "{\"repoUrl\":\"$URL\",\"unknown\":1}"
expect_status 400 VALIDATION_FAILED

info "GIT_NETWORK_ERROR (nobody listens), GIT_AUTH_FAILED (401)"
checkout '{"repoUrl":"http://127.0.0.1:1/repo.git","targetDir":"/tmp/net"}'
expect_status 502 GIT_NETWORK_ERROR
checkout '{"repoUrl":"http://127.0.0.1:8001/repo.git","targetDir":"/tmp/auth"}'
expect_status 401 GIT_AUTH_FAILED

info "credentials in the URL are never echoed"
for u in 'http://user:s3cr3tpw@127.0.0.1:8001/repo.git' 'http://user:s3cr3tpw@127.0.0.1:1/repo.git' \
        'http://user:s3cr3tpw@127.0.0.1:8000/nope.git'; do
        checkout "{\"repoUrl\":\"$u\",\"targetDir\":\"/tmp/cred\"}"
        [ "$API_STATUS" != 200 ] || fail "$u: cloned"
        assert_not_contains "$(cat "$IT_TMP/body")" s3cr3tpw "error answer for $u"
        assert_contains "$(body .message)" "127.0.0.1" "the message names the host"
done
checkout "{\"repoUrl\":\"http://user:s3cr3tpw@127.0.0.1:8000/repo.git\",\"targetDir\":\"/tmp/cred\"}"
expect_status 200
assert_eq "http://127.0.0.1:8000/repo.git" "$(body .repoUrl)" "repoUrl without credentials"
assert_not_contains "$(cat "$CELLAD_LOG")" s3cr3tpw "cellad's log"
"$CLI" git clone "$S" 'http://u:s3cr3tpw@127.0.0.1:8000/nope.git' >"$IT_TMP/out" 2>"$IT_TMP/err" &&
        fail "cella git clone of a missing repository succeeded"
assert_not_contains "$(cat "$IT_TMP/out" "$IT_TMP/err")" s3cr3tpw "CLI output"

info "timeout: the clone is killed, COMMAND_TIMEOUT"
# a server that accepts and never answers
api_json POST "$P" '{"command":"python3 -c \"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\\\"127.0.0.1\\\", 8002)); s.listen(); c=s.accept(); time.sleep(3600)\"","processId":"hang"}'
expect_status 200
api_json POST "$P/hang/waitForPort" '{"port":8002,"timeout":30000}'
expect_status 200
checkout '{"repoUrl":"http://127.0.0.1:8002/repo.git","timeout":1500,"targetDir":"/tmp/hang"}'
expect_status 408 COMMAND_TIMEOUT
assert_eq 0 "$(run_in "$S" 'ps -eo args= | grep -c -e "^git clone" -e "^git-remote-http" -e "^[/]usr/lib/git-core/git-remote" || true')" "clone killed"

info "cella git clone: options, output, exit status"
"$CLI" git clone "$S" "$URL" --branch dev --dir /tmp/cli >"$IT_TMP/out" ||
        fail "cella git clone failed: $(cat "$IT_TMP/out")"
assert_contains "$(cat "$IT_TMP/out")" /tmp/cli "prints the directory"
assert_eq dev "$(run_in "$S" 'cat /tmp/cli/dev.txt')" "CLI branch"
"$CLI" git clone "$S" "git://127.0.0.1:9418/repo.git" --branch dev --depth 1 --dir /tmp/cli-shallow >/dev/null ||
        fail "cella git clone --depth failed"
assert_eq true "$(run_in "$S" 'git -C /tmp/cli-shallow rev-parse --is-shallow-repository')" "CLI shallow"
rc=0
"$CLI" git clone "$S" "http://127.0.0.1:8000/nope.git" >/dev/null 2>"$IT_TMP/err" || rc=$?
assert_eq 1 "$rc" "exit status of a failed clone"
assert_contains "$(cat "$IT_TMP/err")" GIT_REPOSITORY_NOT_FOUND "CLI error code"
rc=0
"$CLI" git clone "$S" >/dev/null 2>&1 || rc=$?
assert_eq 2 "$rc" "usage error"
rc=0
"$CLI" git clone "$S" "http://127.0.0.1:8002/repo.git" --dir /tmp/cli-hang --timeout 1000 \
        >/dev/null 2>&1 || rc=$?
assert_eq 124 "$rc" "timeout exit status"

info "ok"
