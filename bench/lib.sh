# Sourced by the bench scripts (pty.sh, preview.sh, images.sh): a temp dir $tmp, and
# bench_cellad IMAGES_DIR [SANDBOX...], which starts a cellad on an ephemeral loopback port
# (--pool 0, its data in $tmp/data) and sets $url. At exit the named sandboxes are
# destroyed, cellad is stopped and $tmp is removed.
tmp=$(mktemp -d)
cellad_pid=
url=
bench_sandboxes=()
bench_cleanup() {
        if [ -n "$cellad_pid" ]; then
                for s in "${bench_sandboxes[@]}"; do
                        curl -sS -X DELETE "$url/v1/sandboxes/$s" >/dev/null 2>&1 || true
                done
                kill -TERM "$cellad_pid" 2>/dev/null || true
                wait "$cellad_pid" 2>/dev/null || true
        fi
        rm -rf "$tmp"
}
trap bench_cleanup EXIT

bench_cellad() {
        local images=$1
        shift
        bench_sandboxes=("$@")
        "$BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$tmp/data" --images "$images" \
                --pool 0 --log-level warn >"$tmp/log" 2>&1 &
        cellad_pid=$!
        for _ in $(seq 1 300); do
                url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/log" | head -n 1) || true
                [ -n "$url" ] && break
                sleep 0.1
        done
        [ -n "$url" ] || { cat "$tmp/log" >&2; exit 1; }
}

# bench_figures NAME: replace the lines of docs/performance.md between
# <!-- BEGIN NAME --> and <!-- END NAME --> with stdin (framed by blank lines).
bench_figures() {
        local doc=$src/docs/performance.md
        {
                sed -n "1,/<!-- BEGIN $1 -->/p" "$doc"
                echo
                cat
                echo
                sed -n "/<!-- END $1 -->/,\$p" "$doc"
        } >"$tmp/doc"
        cp "$tmp/doc" "$doc"
        echo "updated $doc" >&2
}
