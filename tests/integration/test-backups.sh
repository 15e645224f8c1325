#!/bin/bash
# Backups (docs/api.md "Backups", decision 0049): a directory with files, modes, symbolic
# links, an empty directory and a large sparse file goes round trip through the local store
# (checksums), into the same and another sandbox; the target directory is replaced whole;
# a damaged archive (truncated, a flipped byte) is refused with BACKUP_RESTORE_FAILED and
# leaves the target exactly as it was; bad input gets its code (relative dir, "..", a dir
# outside the allowed ones, bad ttl, unknown backup 404); a link to /etc/shadow or into
# another sandbox archives as a link, never the host's content; archives crafted with
# "../", absolute names or a link-then-file pair write nothing outside the target; a
# backup with a short ttl cannot be restored (BACKUP_EXPIRED) and is swept from the store.
# With IT_BACKUP_S3=1 (test-backups-s3.sh) the same runs against an S3 server.
. "$(dirname "$0")/lib.sh"

STORE_ARGS=()
if [ -n "${IT_BACKUP_STORE:-}" ]; then
        STORE_ARGS=(--backup-store "$IT_BACKUP_STORE")
fi
start_cellad "${STORE_ARGS[@]}"

# store_archive ID: the path of a backup's archive in the local store.
store_archive() {
        echo "$IT_TMP/data/backups/$1/archive.tar.zst"
}

A=$(sbx bka)
B=$(sbx bkb)
info "a tree in $A"
run_in "$A" 'set -e; mkdir -p /workspace/proj/src /workspace/proj/empty /workspace/proj/deep/a/b
        cd /workspace/proj
        echo hello >src/main.c; chmod 0640 src/main.c
        printf "#!/bin/sh\necho hi\n" >run.sh; chmod 0755 run.sh
        head -c 3000000 /dev/urandom >blob
        ln -s src/main.c link-rel; ln -s /etc/shadow link-shadow; ln -s /nonexistent dangling
        mkfifo fifo
        truncate -s 512M sparse; echo tail-data >>sparse
        dd if=/dev/urandom of=sparse bs=1M count=2 seek=100 conv=notrunc 2>/dev/null
        echo deep >deep/a/b/c.txt
        chown 1000:1000 deep/a/b/c.txt
        echo x >setuid; chmod 4755 setuid
        echo ok' >/dev/null
sums_cmd='cd /workspace/proj && find . -type f ! -name setuid | sort | xargs sha256sum &&
        find . -printf "%p %y %m %U:%G %l\n" | grep -v "^./setuid " | sort'
want=$(run_in "$A" "$sums_cmd")

info "create"
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj","name":"first","ttl":3600}'
expect_status 201
ID=$(body .id)
case "$ID" in ????????-????-4???-????-????????????) ;; *) fail "backup id '$ID'" ;; esac
assert_eq /workspace/proj "$(body .dir)" "dir"
assert_eq first "$(body .name)" "name"
assert_eq "$A" "$(body .sandbox)" "sandbox"
size=$(body .sizeBytes)
[ "$size" -gt 3000000 ] && [ "$size" -lt 20000000 ] || fail "sizeBytes $size (the sparse file stored whole?)"
created=$(date -d "$(body .createdAt)" +%s)
expires=$(date -d "$(body .expiresAt)" +%s)
assert_eq 3600 $((expires - created)) "expiresAt - createdAt"

api GET "/v1/backups/$ID" >/dev/null
expect_status 200
assert_eq "$size" "$(body .sizeBytes)" "get"
assert_eq "$ID" "$(api GET /v1/backups | jq -r '.backups[0].id')" "list"

info "the host's /etc/shadow is not in the backup"
if [ -z "${IT_BACKUP_STORE:-}" ]; then
        arch=$(store_archive "$ID")
        [ -f "$arch" ] || fail "no archive at $arch"
        listing=$(zstd -dc "$arch" | tar -tvf -)
        assert_contains "$listing" "link-shadow -> /etc/shadow" "the link is archived as a link"
        root_hash=$(grep '^root:' /etc/shadow | cut -d: -f2 | head -c 20)
        if [ -n "$root_hash" ] && [ "${#root_hash}" -gt 4 ]; then
                if zstd -dc "$arch" | grep -qaF "$root_hash"; then
                        fail "the host's /etc/shadow content is in the archive"
                fi
        fi
fi

info "restore into the same sandbox: the directory is replaced"
run_in "$A" 'cd /workspace/proj && echo changed >src/main.c && rm -rf deep && echo extra >new-file && echo ok' >/dev/null
api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{}'
expect_status 200
assert_eq true "$(body .success)" "success"
assert_eq "$ID" "$(body .id)" "restore id"
assert_eq /workspace/proj "$(body .dir)" "restore dir"
got=$(run_in "$A" "$sums_cmd")
assert_eq "$want" "$got" "restored tree (checksums, types, modes, owners, links)"
assert_eq gone "$(run_in "$A" '[ -e /workspace/proj/new-file ] && echo there || echo gone')" \
        "a file made after the backup"
assert_eq 755 "$(run_in "$A" 'stat -c %a /workspace/proj/setuid')" "set-id bits dropped"
assert_eq "" "$(run_in "$A" 'ls -a /workspace | grep cella-restore || true')" "no temporary left"
alloc=$(run_in "$A" 'du -k /workspace/proj/sparse | cut -f1')
[ "$alloc" -lt 65536 ] || fail "the sparse file takes ${alloc} KiB after the restore"

info "restore into another sandbox and another dir"
api_json POST "/v1/sandboxes/$B/backups/$ID/restore" '{"dir":"/home/copy"}'
expect_status 200
assert_eq "$B" "$(body .sandbox)" "restored sandbox"
got=$(run_in "$B" "${sums_cmd//\/workspace\/proj//home/copy}")
assert_eq "$want" "$got" "tree in the other sandbox"
# The restore made the directory with the sandbox's own ids, not the host's.
assert_eq "0:0 1000:1000" "$(run_in "$B" 'stat -c %u:%g /home/copy; stat -c %u:%g /home/copy/deep/a/b/c.txt' | tr '\n' ' ' | sed 's/ $//')" "owners"

info "bad input"
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"workspace/proj"}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/../etc"}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/etc"}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj","ttl":0}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj","ttl":"soon"}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj","extra":1}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/none"}'
expect_status 400 INVALID_BACKUP_CONFIG
api_json POST "/v1/sandboxes/nosuch/backups" '{"dir":"/workspace"}'
expect_status 404 SANDBOX_NOT_FOUND
api GET /v1/backups/00000000-0000-4000-8000-000000000000 >/dev/null
expect_status 404 BACKUP_NOT_FOUND
api GET /v1/backups/not-an-id >/dev/null
expect_status 404 BACKUP_NOT_FOUND
api DELETE /v1/backups/00000000-0000-4000-8000-000000000000 >/dev/null
expect_status 404 BACKUP_NOT_FOUND
api_json POST "/v1/sandboxes/$A/backups/00000000-0000-4000-8000-000000000000/restore" '{}'
expect_status 404 BACKUP_NOT_FOUND
api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/proc/x"}'
expect_status 400 INVALID_BACKUP_CONFIG
assert_eq 1 "$(api GET /v1/backups | jq '.backups | length')" "bad input made no backup"

info "a link into another sandbox archives as a link"
run_in "$B" 'mkdir -p /workspace/secret && echo b-secret-7731 >/workspace/secret/s && echo ok' >/dev/null
bdir=$(ls -d "$IT_TMP"/data/sandboxes/s* | head -n 1)
run_in "$A" "mkdir -p /workspace/esc && ln -s $bdir /workspace/esc/other && ln -s /proc/1/root /workspace/esc/proc-root && echo ok" >/dev/null
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/esc"}'
expect_status 201
ESC=$(body .id)
if [ -z "${IT_BACKUP_STORE:-}" ]; then
        if zstd -dc "$(store_archive "$ESC")" | grep -qaF b-secret-7731; then
                fail "another sandbox's file is in the backup"
        fi
fi
api_json POST "/v1/sandboxes/$A/backups/$ESC/restore" '{"dir":"/workspace/esc2"}'
expect_status 200
assert_eq "$bdir" "$(run_in "$A" 'readlink /workspace/esc2/other')" "the link restored as a link"

if [ -z "${IT_BACKUP_STORE:-}" ]; then
        info "a damaged archive is refused and changes nothing"
        before=$(run_in "$A" "$sums_cmd")
        run_in "$A" 'echo marker >/workspace/proj/marker && echo ok' >/dev/null
        before=$(run_in "$A" "$sums_cmd")
        arch=$(store_archive "$ID")
        cp "$arch" "$IT_TMP/good.tar.zst"
        # a byte flipped in the middle
        python3 - "$arch" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0xff
open(p, 'wb').write(bytes(b))
EOF
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_contains "$(body .message)" "damaged" "the message"
        assert_eq "$before" "$(run_in "$A" "$sums_cmd")" "the target after a damaged archive"
        assert_eq "" "$(run_in "$A" 'ls -a /workspace | grep cella-restore || true')" "no temporary left"
        # truncated
        head -c $((size / 2)) "$IT_TMP/good.tar.zst" >"$arch"
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_eq "$before" "$(run_in "$A" "$sums_cmd")" "the target after a truncated archive"
        # into a new dir: it is not made
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/workspace/never"}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_eq gone "$(run_in "$A" '[ -e /workspace/never ] && echo there || echo gone')" "new dir"
        cp "$IT_TMP/good.tar.zst" "$arch"

        info "crafted archives write nothing outside the target"
        crafted() { # NAME: an archive built by python's tarfile (stdin: the script's body)
                python3 - "$IT_TMP/$1.tar" || fail "build $1"
                zstd -q -f "$IT_TMP/$1.tar" -o "$IT_TMP/$1.tar.zst"
        }
        crafted dotdot <<'EOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
for name in ['.', './ok', '../../escape-dotdot']:
    i = tarfile.TarInfo(name)
    if name == '.':
        i.type = tarfile.DIRTYPE; i.mode = 0o755; t.addfile(i); continue
    d = b'pwned\n'; i.size = len(d); t.addfile(i, io.BytesIO(d))
t.close()
EOF
        crafted absolute <<'EOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
i = tarfile.TarInfo('/workspace/escape-absolute'); d = b'pwned\n'; i.size = len(d)
t.addfile(i, io.BytesIO(d))
t.close()
EOF
        crafted linkfile <<'EOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
i = tarfile.TarInfo('./l'); i.type = tarfile.SYMTYPE; i.linkname = '/workspace'; t.addfile(i)
i = tarfile.TarInfo('./l/escape-link'); d = b'pwned\n'; i.size = len(d)
t.addfile(i, io.BytesIO(d))
t.close()
EOF
        crafted device <<'EOF'
import sys, tarfile
t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
i = tarfile.TarInfo('./null'); i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 3
t.addfile(i)
t.close()
EOF
        for c in dotdot absolute linkfile device; do
                # the crafted archive stands in for the good one, its record made to match
                cp "$IT_TMP/$c.tar.zst" "$arch"
                rec="$IT_TMP/data/backups/$ID/backup.json"
                cp "$rec" "$IT_TMP/rec.json"
                jq -c --arg s "$(sha256sum <"$arch" | cut -d' ' -f1)" \
                        --argjson n "$(stat -c %s "$arch")" '.sha256=$s | .sizeBytes=$n' \
                        "$IT_TMP/rec.json" >"$rec"
                api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/workspace/t/in"}'
                expect_status 500 BACKUP_RESTORE_FAILED
                out=$(run_in "$A" 'ls -a /workspace /workspace/t 2>&1; ls /escape* /workspace/escape* 2>&1 || true')
                assert_not_contains "$out" escape- "$c: a file outside the target"
                assert_not_contains "$out" "in" "$c: the target made"
                assert_not_contains "$out" cella-restore "$c: a temporary left"
                cp "$IT_TMP/rec.json" "$rec"
        done
        [ ! -e /escape-absolute ] && [ ! -e "$IT_TMP/escape-dotdot" ] || fail "a crafted archive wrote on the host"
        cp "$IT_TMP/good.tar.zst" "$arch"
fi

info "delete"
api DELETE "/v1/backups/$ESC" >/dev/null
expect_status 200
assert_eq true "$(body .deleted)" "deleted"
api GET "/v1/backups/$ESC" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
[ -z "${IT_BACKUP_STORE:-}" ] && { [ ! -e "$IT_TMP/data/backups/$ESC" ] || fail "files of a deleted backup"; }

info "expiry"
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj/src","ttl":1}'
expect_status 201
EXP=$(body .id)
sleep 1.2
api_json POST "/v1/sandboxes/$A/backups/$EXP/restore" '{}'
case "$API_STATUS" in
400) expect_status 400 BACKUP_EXPIRED ;;
404) expect_status 404 BACKUP_NOT_FOUND ;; # already swept
*) fail "restore of an expired backup: HTTP $API_STATUS $(body)" ;;
esac
for _ in $(seq 1 60); do
        api GET "/v1/backups/$EXP" >/dev/null
        [ "$API_STATUS" = 404 ] && break
        sleep 0.5
done
expect_status 404 BACKUP_NOT_FOUND
[ -z "${IT_BACKUP_STORE:-}" ] && { [ ! -e "$IT_TMP/data/backups/$EXP" ] || fail "files of an expired backup"; }
api GET "/v1/backups/$ID" >/dev/null
expect_status 200

info "ok"
