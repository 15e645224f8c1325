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
# A backup put into the store by someone else (another cellad sharing it) is listed and
# restored. With IT_BACKUP_S3=1 (test-backups-s3.sh) the same runs against a real S3
# server on loopback (@20minutes/s3rver, pinned by tests/s3's lock file), which checks
# SigV4 signatures: a wrongly signed request is refused, and so is every request of a
# cellad given the wrong secret; the backup of 40 MiB of random data is one object.
# Excludes and .gitignore files (nested, negated, directory-only, anchored, "**") leave out
# what they match, through the CLI and the API; bad patterns and a hostile .gitignore are
# 400 INVALID_BACKUP_CONFIG. To S3, an archive of several parts is a multipart upload
# streamed from the archiver (no local copy), a small one or multipart:false one PUT, and a
# backup that fails midway (its archiver killed) aborts its upload: no object, no upload
# left in progress. A consistent backup of a directory a writer keeps changing restores as
# one point in time (every recorded checksum holds, no file beyond), and a snapshot asked
# for meanwhile waits its turn and succeeds.
. "$(dirname "$0")/lib.sh"

STORE_ARGS=()
S3=
if [ -n "${IT_BACKUP_S3:-}" ]; then
        . "$(dirname "$0")/lib-daemons.sh"
        start_s3
        S3=http://127.0.0.1:$S3PORT
        s3() { # METHOD KEY [curl args]: a signed request to the bucket; prints the status
                local m=$1 k=$2
                shift 2
                curl -s -o "$IT_TMP/s3body" -w '%{http_code}' -X "$m" --aws-sigv4 aws:amz:us-east-1:s3 \
                        --user "S3RVER:${S3SECRET:-S3RVER}" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
                        "$@" "$S3/cella-it/$k"
        }
        info "the S3 server checks signatures"
        assert_eq 200 "$(s3 PUT probe -T /etc/hostname)" "a signed upload"
        assert_eq 403 "$(S3SECRET=wrong s3 PUT probe -T /etc/hostname)" "an upload signed with the wrong secret"
        assert_eq 204 "$(s3 DELETE probe)" "a signed delete"
        STORE_ARGS=(--backup-store "s3://cella-it/it?endpoint=$S3&region=us-east-1")
        info "a cellad with the wrong secret cannot store a backup"
        AWS_SECRET_ACCESS_KEY=wrong start_cellad "${STORE_ARGS[@]}"
        W=$(sbx wrong)
        run_in "$W" 'mkdir -p /workspace/w && echo ok' >/dev/null
        api_json POST "/v1/sandboxes/$W/backups" '{"dir":"/workspace/w"}'
        expect_status 500 BACKUP_CREATE_FAILED
        assert_contains "$(body .message)" "403" "the server's refusal"
        api GET /v1/backups >/dev/null
        expect_status 500 INTERNAL_ERROR
        api DELETE "/v1/sandboxes/$W" >/dev/null
        stop_cellad
        assert_eq "" "$(ls -A "$IT_TMP/data/backups")" "what the refused backup left"
fi
start_cellad "${STORE_ARGS[@]}"

# get_archive ID FILE / put_archive ID FILE, get_record ID FILE / put_record ID FILE: a
# backup's archive and record, from and into the store.
store_file() { # ID NAME: the local path, or the S3 key
        if [ -n "$S3" ]; then echo "it/backups/$1/$2"; else echo "$IT_TMP/data/backups/$1/$2"; fi
}
get_file() {
        if [ -n "$S3" ]; then
                assert_eq 200 "$(s3 GET "$(store_file "$1" "$2")")" "S3 GET $2"
                cp "$IT_TMP/s3body" "$3"
        else
                cp "$(store_file "$1" "$2")" "$3"
        fi
}
put_file() {
        if [ -n "$S3" ]; then
                assert_eq 200 "$(s3 PUT "$(store_file "$1" "$2")" -T "$3")" "S3 PUT $2"
        else
                cp "$3" "$(store_file "$1" "$2")"
        fi
}
get_archive() { get_file "$1" archive.tar.zst "$2"; }
put_archive() { put_file "$1" archive.tar.zst "$2"; }
get_record() { get_file "$1" backup.json "$2"; }
put_record() { put_file "$1" backup.json "$2"; }
gone_from_store() { # ID
        if [ -n "$S3" ]; then
                assert_eq 404 "$(s3 GET "$(store_file "$1" backup.json)")" "record of $1 in S3"
                assert_eq 404 "$(s3 GET "$(store_file "$1" archive.tar.zst)")" "archive of $1 in S3"
        else
                [ ! -e "$IT_TMP/data/backups/$1" ] || fail "files of backup $1 left"
        fi
}

A=$(sbx bka)
B=$(sbx bkb)
info "a tree in $A"
run_in "$A" 'set -e; mkdir -p /workspace/proj/src /workspace/proj/empty /workspace/proj/deep/a/b
        cd /workspace/proj
        echo hello >src/main.c; chmod 0640 src/main.c
        printf "#!/bin/sh\necho hi\n" >run.sh; chmod 0755 run.sh
        head -c 41943040 /dev/urandom >blob
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
[ "$size" -gt 41943040 ] && [ "$size" -lt 60000000 ] || fail "sizeBytes $size (the sparse file stored whole?)"
created=$(date -d "$(body .createdAt)" +%s)
expires=$(date -d "$(body .expiresAt)" +%s)
assert_eq 3600 $((expires - created)) "expiresAt - createdAt"

api GET "/v1/backups/$ID" >/dev/null
expect_status 200
assert_eq "$size" "$(body .sizeBytes)" "get"
assert_eq "$ID" "$(api GET /v1/backups | jq -r '.backups[0].id')" "list"

info "the host's /etc/shadow is not in the backup"
get_archive "$ID" "$IT_TMP/a.tar.zst"
assert_eq "$size" "$(stat -c %s "$IT_TMP/a.tar.zst")" "the stored archive's size"
listing=$(zstd -dc "$IT_TMP/a.tar.zst" | tar -tvf -)
assert_contains "$listing" "link-shadow -> /etc/shadow" "the link is archived as a link"
shadow_line=$(head -n 1 /etc/shadow)
if zstd -dc "$IT_TMP/a.tar.zst" | grep -qaF "$shadow_line"; then
        fail "the host's /etc/shadow content is in the archive"
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
[ -n "$S3" ] || assert_eq "" "$(ls -A "$IT_TMP/data/backups" | grep -v "^$ID\$" || true)" "the local store after bad input"

info "a link into another sandbox archives as a link"
run_in "$B" 'mkdir -p /workspace/secret && echo b-secret-7731 >/workspace/secret/s && echo ok' >/dev/null
bdir=$(ls -d "$IT_TMP"/data/sandboxes/s* | head -n 1)
run_in "$A" "mkdir -p /workspace/esc && ln -s $bdir /workspace/esc/other && ln -s /proc/1/root /workspace/esc/proc-root && echo ok" >/dev/null
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/esc"}'
expect_status 201
ESC=$(body .id)
get_archive "$ESC" "$IT_TMP/esc.tar.zst"
if zstd -dc "$IT_TMP/esc.tar.zst" | grep -qaF b-secret-7731; then
        fail "another sandbox's file is in the backup"
fi
api_json POST "/v1/sandboxes/$A/backups/$ESC/restore" '{"dir":"/workspace/esc2"}'
expect_status 200
assert_eq "$bdir" "$(run_in "$A" 'readlink /workspace/esc2/other')" "the link restored as a link"

if true; then
        info "a damaged archive is refused and changes nothing"
        before=$(run_in "$A" "$sums_cmd")
        run_in "$A" 'echo marker >/workspace/proj/marker && echo ok' >/dev/null
        before=$(run_in "$A" "$sums_cmd")
        arch=$IT_TMP/work.tar.zst
        get_archive "$ID" "$IT_TMP/good.tar.zst"
        cp "$IT_TMP/good.tar.zst" "$arch"
        # a byte flipped in the middle
        python3 - "$arch" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0xff
open(p, 'wb').write(bytes(b))
EOF
        put_archive "$ID" "$arch"
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_contains "$(body .message)" "damaged" "the message"
        assert_eq "$before" "$(run_in "$A" "$sums_cmd")" "the target after a damaged archive"
        assert_eq "" "$(run_in "$A" 'ls -a /workspace | grep cella-restore || true')" "no temporary left"
        # truncated
        head -c $((size / 2)) "$IT_TMP/good.tar.zst" >"$arch"
        put_archive "$ID" "$arch"
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_eq "$before" "$(run_in "$A" "$sums_cmd")" "the target after a truncated archive"
        # into a new dir: it is not made
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/workspace/never"}'
        expect_status 500 BACKUP_RESTORE_FAILED
        assert_eq gone "$(run_in "$A" '[ -e /workspace/never ] && echo there || echo gone')" "new dir"
        put_archive "$ID" "$IT_TMP/good.tar.zst"

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
                arch=$IT_TMP/$c.tar.zst
                put_archive "$ID" "$arch"
                get_record "$ID" "$IT_TMP/rec.json"
                jq -c --arg s "$(sha256sum <"$arch" | cut -d' ' -f1)" \
                        --argjson n "$(stat -c %s "$arch")" '.sha256=$s | .sizeBytes=$n' \
                        "$IT_TMP/rec.json" >"$IT_TMP/rec2.json"
                put_record "$ID" "$IT_TMP/rec2.json"
                api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/workspace/t/in"}'
                expect_status 500 BACKUP_RESTORE_FAILED
                out=$(run_in "$A" 'ls -a /workspace /workspace/t 2>&1; ls /escape* /workspace/escape* 2>&1 || true')
                assert_not_contains "$out" escape- "$c: a file outside the target"
                assert_not_contains "$out" "in" "$c: the target made"
                assert_not_contains "$out" cella-restore "$c: a temporary left"
                put_record "$ID" "$IT_TMP/rec.json"
        done
        [ ! -e /escape-absolute ] && [ ! -e "$IT_TMP/escape-dotdot" ] || fail "a crafted archive wrote on the host"
        put_archive "$ID" "$IT_TMP/good.tar.zst"
        api_json POST "/v1/sandboxes/$A/backups/$ID/restore" '{"dir":"/workspace/again"}'
        expect_status 200
        assert_eq "$want" "$(run_in "$A" "${sums_cmd//\/workspace\/proj//workspace/again}")" "the good archive again"
fi

info "a backup another cellad put in the store is listed and restored"
OTHER=11111111-2222-4333-8444-555555555555
get_record "$ID" "$IT_TMP/rec.json"
jq -c --arg id "$OTHER" '.id=$id | .sandbox="elsewhere" | .name="from-another-node"' \
        "$IT_TMP/rec.json" >"$IT_TMP/other.json"
[ -n "$S3" ] || mkdir -p "$IT_TMP/data/backups/$OTHER"
put_archive "$OTHER" "$IT_TMP/good.tar.zst"
put_record "$OTHER" "$IT_TMP/other.json"
assert_eq from-another-node "$(api GET /v1/backups | jq -r --arg id "$OTHER" '.backups[] | select(.id==$id) | .name')" "listed"
api_json POST "/v1/sandboxes/$B/backups/$OTHER/restore" '{"dir":"/workspace/other"}'
expect_status 200
assert_eq "$want" "$(run_in "$B" "${sums_cmd//\/workspace\/proj//workspace/other}")" "restored from the other's backup"

info "the CLI: backup create|restore|ls|rm"
CLI=$CELLA_BUILD/cella
out=$("$CLI" backup create "$A" /workspace/proj/src --name cli-label --ttl 600)
case "$out" in "backup "????????-????-4???-????-????????????" of '$A':/workspace/proj/src: "*" bytes, expires "*) ;;
*) fail "backup create said '$out'" ;; esac
CLIB=$(echo "$out" | cut -d' ' -f2)
"$CLI" backup ls | grep -q "^$CLIB  *cli-label " || fail "cella backup ls: $("$CLI" backup ls)"
assert_eq cli-label "$("$CLI" backup ls --json | jq -r --arg id "$CLIB" '.backups[] | select(.id==$id) | .name')" "backup ls --json"
out=$("$CLI" backup restore "$B" "$CLIB" --dir /tmp/cli-src)
assert_eq "restored backup $CLIB into '$B':/tmp/cli-src" "$out" "backup restore"
assert_eq hello "$(run_in "$B" 'cat /tmp/cli-src/main.c')" "the restored file"
"$CLI" backup restore "$B" 00000000-0000-4000-8000-000000000000 2>"$IT_TMP/cli.err" && fail "restore of an unknown backup succeeded"
assert_contains "$(cat "$IT_TMP/cli.err")" BACKUP_NOT_FOUND "the CLI's error"
assert_eq "deleted backup '$CLIB'" "$("$CLI" backup rm "$CLIB")" "backup rm"

info "excludes and .gitignore files leave out what they match"
run_in "$A" 'set -e; rm -rf /workspace/gi; mkdir -p /workspace/gi && cd /workspace/gi
        mkdir -p node_modules/m src/gen build docs/a/b vendor/keep
        printf "build/\n*.tmp\n/top.txt\ndocs/**/*.html\n!important.tmp\n" >.gitignore
        printf "gen/\n!x.tmp\n" >src/.gitignore
        printf "*\n" >build/.gitignore
        touch node_modules/m/i.js src/a.c src/gen/g.c src/x.tmp src/y.tmp build/o.o top.txt \
                src/top.txt docs/a/b/p.html docs/i.html docs/readme.md debug.log main.c \
                important.tmp vendor/keep/v.log
        echo ok' >/dev/null
out=$("$CELLA_BUILD/cella" backup create "$A" /workspace/gi --gitignore --exclude node_modules \
        --exclude '*.log' --exclude '!vendor/keep/*.log' --json)
GI=$(echo "$out" | jq -r .id)
api_json POST "/v1/sandboxes/$B/backups/$GI/restore" '{"dir":"/workspace/gi-copy"}'
expect_status 200
assert_eq "$(printf '%s\n' . ./.gitignore ./docs ./docs/a ./docs/a/b ./docs/readme.md \
        ./important.tmp ./main.c ./src ./src/.gitignore ./src/a.c ./src/top.txt ./src/x.tmp \
        ./vendor ./vendor/keep ./vendor/keep/v.log)" \
        "$(run_in "$B" 'cd /workspace/gi-copy && find . | LC_ALL=C sort')" "the tree without what was left out"
# the same through the API, without gitignore: only the excludes
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/gi","excludes":["/build/","**/*.tmp"]}'
expect_status 201
GI2=$(body .id)
api_json POST "/v1/sandboxes/$B/backups/$GI2/restore" '{"dir":"/workspace/gi-copy2"}'
expect_status 200
assert_eq "$(printf '%s\n' ./.gitignore ./debug.log ./docs/a/b/p.html ./docs/i.html ./docs/readme.md \
        ./main.c ./node_modules/m/i.js ./src/.gitignore ./src/a.c ./src/gen/g.c ./src/top.txt \
        ./top.txt ./vendor/keep/v.log)" \
        "$(run_in "$B" 'cd /workspace/gi-copy2 && find . -type f | LC_ALL=C sort')" "excludes alone"
for bad in '{"dir":"/workspace/gi","excludes":["a[b"]}' '{"dir":"/workspace/gi","excludes":[""]}' \
        '{"dir":"/workspace/gi","excludes":"*.log"}' '{"dir":"/workspace/gi","excludes":[1]}' \
        '{"dir":"/workspace/gi","excludes":["a//b"]}' '{"dir":"/workspace/gi","gitignore":"yes"}' \
        '{"dir":"/workspace/gi","consistent":1}' '{"dir":"/workspace/gi","multipart":"no"}'; do
        api_json POST "/v1/sandboxes/$A/backups" "$bad"
        expect_status 400 INVALID_BACKUP_CONFIG
done
many=$(jq -cn '{dir:"/workspace/gi", excludes:[range(0;257) | "p\(.)"]}')
api_json POST "/v1/sandboxes/$A/backups" "$many"
expect_status 400 INVALID_BACKUP_CONFIG
# a hostile .gitignore: over the size limit, the backup is refused naming it
run_in "$A" 'head -c 70000 /dev/zero | tr "\0" "a" >/workspace/gi/src/.gitignore && echo ok' >/dev/null
api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/gi","gitignore":true}'
expect_status 400 INVALID_BACKUP_CONFIG
assert_contains "$(body .message)" "src/.gitignore" "the message names the file"
api DELETE "/v1/backups/$GI" >/dev/null
expect_status 200
api DELETE "/v1/backups/$GI2" >/dev/null
expect_status 200

if [ -z "$S3" ]; then
        info "consistent: a backup while a writer writes is one point in time, a snapshot waits its turn"
        W=$(sbx bkw)
        start_writer "$W"
        # a large file first: the archive takes a while, the writer writes meanwhile
        run_in "$W" 'head -c 134217728 /dev/urandom >/workspace/w/0-big && echo ok' >/dev/null
        curl -sS -o "$IT_TMP/cons.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
                --data-binary '{"dir":"/workspace/w","consistent":true}' \
                "$CELLA_URL/v1/sandboxes/$W/backups" >"$IT_TMP/cons.status" &
        cpid=$!
        sleep 0.2
        curl -sS -o "$IT_TMP/snap.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
                --data-binary '{}' "$CELLA_URL/v1/sandboxes/$W/snapshots" >"$IT_TMP/snap.status"
        wait "$cpid" || fail "the consistent backup's request"
        assert_eq 201 "$(cat "$IT_TMP/cons.status")" "the consistent backup: $(cat "$IT_TMP/cons.body")"
        assert_eq 201 "$(cat "$IT_TMP/snap.status")" "the snapshot beside it: $(cat "$IT_TMP/snap.body")"
        CONS=$(jq -r .id <"$IT_TMP/cons.body")
        n=$(run_in "$W" 'wc -l </workspace/w/sums')
        writer_goes_on "$W" "$n"
        api_json POST "/v1/sandboxes/$B/backups/$CONS/restore" '{"dir":"/workspace/wcopy"}'
        expect_status 200
        # every file the writer recorded is there with its checksum, and no file beyond the
        # one it had renamed but not yet recorded
        run_in "$B" 'cd /workspace/wcopy && sha256sum -c --quiet sums && m=$(wc -l <sums) &&
                n=$(ls | grep -cE "^[0-9]+$") && [ "$m" -ge 20 ] &&
                { [ "$n" -eq "$m" ] || [ "$n" -eq $((m + 1)) ]; } && echo consistent $m $n' \
                >"$IT_TMP/cons.check" || true
        assert_contains "$(cat "$IT_TMP/cons.check")" consistent "the restored tree is one point in time ($(cat "$IT_TMP/cons.check"))"
        api DELETE "/v1/snapshots/$(jq -r .snapshotId <"$IT_TMP/snap.body")" >/dev/null
        expect_status 200
        api DELETE "/v1/backups/$CONS" >/dev/null
        expect_status 200
        api DELETE "/v1/sandboxes/$W" >/dev/null
        expect_status 200
fi

info "delete"
api DELETE "/v1/backups/$ESC" >/dev/null
expect_status 200
assert_eq true "$(body .deleted)" "deleted"
api GET "/v1/backups/$ESC" >/dev/null
expect_status 404 BACKUP_NOT_FOUND
gone_from_store "$ESC"

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
gone_from_store "$EXP"
api GET "/v1/backups/$ID" >/dev/null
expect_status 200

if [ -n "$S3" ]; then
        info "multipart: an archive of several parts is streamed to the bucket, no local copy"
        s3bucket() { # QUERY: a signed GET of the bucket itself (no '/' after its name); 200
                assert_eq 200 "$(curl -s -o "$IT_TMP/s3body" -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
                        --user S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
                        "$S3/cella-it?$1")" "GET bucket?$1" >/dev/null
        }
        s3keys() { # KEYS: the bucket's keys under it/backups/
                s3bucket "list-type=2&prefix=it%2Fbackups%2F"
                KEYS=$(grep -o '<Key>[^<]*</Key>' "$IT_TMP/s3body" | sed 's/<[^>]*>//g' | sort)
        }
        s3uploads() { # UPLOADS: the multipart uploads in progress (ListMultipartUploads)
                s3bucket "uploads="
                grep -q '<ListMultipartUploadsResult' "$IT_TMP/s3body" || fail "ListMultipartUploads: $(cat "$IT_TMP/s3body")"
                UPLOADS=$(grep -o '<UploadId>[^<]*</UploadId>' "$IT_TMP/s3body" || true)
        }
        now=$(run_in "$A" "$sums_cmd")
        api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj"}'
        expect_status 201
        MP=$(body .id)
        mpsize=$(body .sizeBytes)
        grep "backup '$MP'" "$CELLAD_LOG" | grep -q "streamed, [5-9] parts" ||
                fail "the 40 MiB archive in 5 to 9 parts: $(grep "backup '$MP'" "$CELLAD_LOG")"
        get_archive "$MP" "$IT_TMP/mp.tar.zst"
        assert_eq "$mpsize" "$(stat -c %s "$IT_TMP/mp.tar.zst")" "the completed object's size"
        assert_eq "$(get_record "$MP" "$IT_TMP/mp.json"; jq -r .sha256 "$IT_TMP/mp.json")" \
                "$(sha256sum <"$IT_TMP/mp.tar.zst" | cut -d' ' -f1)" "its SHA-256"
        s3uploads
        assert_eq "" "$UPLOADS" "uploads left in progress"
        api_json POST "/v1/sandboxes/$B/backups/$MP/restore" '{"dir":"/workspace/mp"}'
        expect_status 200
        assert_eq "$now" "$(run_in "$B" "${sums_cmd//\/workspace\/proj//workspace/mp}")" "restored from the parts"
        # small: one PUT; multipart false: spooled, one PUT
        api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj/src"}'
        expect_status 201
        SM=$(body .id)
        grep "backup '$SM'" "$CELLAD_LOG" | grep -q "streamed, 0 parts" || fail "a small archive: $(grep "backup '$SM'" "$CELLAD_LOG")"
        api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/proj","multipart":false}'
        expect_status 201
        SP=$(body .id)
        grep "backup '$SP'" "$CELLAD_LOG" | grep -q "spooled, 0 parts" || fail "multipart false: $(grep "backup '$SP'" "$CELLAD_LOG")"
        api_json POST "/v1/sandboxes/$B/backups/$SP/restore" '{"dir":"/workspace/sp"}'
        expect_status 200
        assert_eq "$now" "$(run_in "$B" "${sums_cmd//\/workspace\/proj//workspace/sp}")" "restored from one PUT"
        for id in "$MP" "$SM" "$SP"; do
                api DELETE "/v1/backups/$id" >/dev/null
                expect_status 200
        done

        info "multipart: a backup that fails midway aborts its upload, nothing stays"
        run_in "$A" 'mkdir -p /workspace/big && head -c 402653184 /dev/urandom >/workspace/big/r && echo ok' >/dev/null
        s3keys
        keys_before=$KEYS
        (
                api_json POST "/v1/sandboxes/$A/backups" '{"dir":"/workspace/big"}'
                echo "$API_STATUS $(jq -r .code <"$IT_TMP/body")" >"$IT_TMP/abort.status"
        ) &
        bgpid=$!
        # an upload in progress with a part stored, then the archiver killed
        for _ in $(seq 1 600); do
                s3uploads
                [ -n "$UPLOADS" ] && [ -n "$(find "$IT_TMP/s3" -path '*uploads*' -name 1 2>/dev/null)" ] && break
                sleep 0.1
        done
        [ -n "$UPLOADS" ] || fail "no multipart upload was seen"
        arch=$(pgrep -P "$CELLAD_PID" -x cella-archive || true)
        [ -n "$arch" ] || fail "no cella-archive under cellad $CELLAD_PID"
        kill -KILL $arch
        wait "$bgpid" || true
        assert_eq "500 BACKUP_CREATE_FAILED" "$(cat "$IT_TMP/abort.status")" "the failed backup's answer"
        for _ in $(seq 1 100); do
                s3uploads
                [ -z "$UPLOADS" ] && break
                sleep 0.1
        done
        assert_eq "" "$UPLOADS" "uploads left after the failure"
        s3keys
        assert_eq "$keys_before" "$KEYS" "the bucket's objects after the failure"
        assert_eq "" "$(ls -A "$IT_TMP/data/backups")" "a local copy"
        run_in "$A" 'rm -rf /workspace/big && echo ok' >/dev/null
fi

info "ok"
