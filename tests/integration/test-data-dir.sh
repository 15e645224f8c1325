#!/bin/bash
# The data directory holds the registry (env values, preview tokens) and every sandbox's
# files: it is 0700 and every file cellad makes directly in it 0600, also when an older
# cellad made them wider (narrowed at start, with a log line). Checked after traffic that
# writes env, labels, a preview token and files, so that SQLite's -wal and -shm exist.
. "$(dirname "$0")/lib.sh"

D=$IT_TMP/data
mkdir -m 0755 "$D"
: >"$D/cella.db"
chmod 0644 "$D/cella.db"
start_cellad

grep -q "data directory $D was mode 0755; now 0700" "$CELLAD_LOG" ||
        fail "no log line for the data directory narrowed: $(cat "$CELLAD_LOG")"
grep -q "registry file $D/cella.db was mode 0644; now 0600" "$CELLAD_LOG" ||
        fail "no log line for the registry narrowed"

S=$(sbx secret)
api_json PUT "/v1/sandboxes/$S" '{"env":{"API_KEY":"s3cr3t"},"labels":{"a":"b"}}'
expect_status 201
api_json POST "/v1/sandboxes/$S/ports" '{"port":8080,"token":"abcdefghijklmnop"}'
expect_status 201
api_json POST "/v1/sandboxes/$S/files/write" '{"path":"a.txt","content":"x"}'
expect_status 200
assert_eq s3cr3t "$(run_in "$S" 'printf %s "$API_KEY"')" "env in the sandbox"

# mode path: the data dir, and everything cellad made at the top of it, in sandboxes/ and
# disk-templates/ (the sandboxes' own files below their dirs are the tenants').
modes() {
        find "$D" -maxdepth 1 -printf '%m %p\n'
        find "$D/sandboxes" "$D/disk-templates" -mindepth 1 -maxdepth 2 -printf '%m %p\n'
}
info "$(modes)"
[ -e "$D/cella.db-wal" ] || fail "no -wal file: the registry is not in WAL mode?"
while read -r mode path; do
        if [ -d "$path" ] && [ ! -L "$path" ]; then
                case $path in
                "$D/sandboxes"/*/upper | "$D/sandboxes"/*/work) ;; # the sandbox's root
                *) [ "$mode" = 700 ] || fail "directory $path is mode $mode, not 700" ;;
                esac
        elif [ -S "$path" ]; then
                [ "$mode" = 600 ] || fail "socket $path is mode $mode, not 600"
        else
                [ "$mode" = 600 ] || fail "file $path is mode $mode, not 600"
        fi
done < <(modes)
[ "$(stat -c %a "$D")" = 700 ] || fail "data dir not 700"

info "data-dir: ok"
