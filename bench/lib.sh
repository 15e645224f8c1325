# Sourced by the bench scripts (pty.sh, preview.sh, images.sh, sdk.sh, sdk-python.sh): a
# temp dir $tmp, and bench_cellad IMAGES_DIR [SANDBOX...], which starts a cellad on an
# ephemeral loopback port (--pool 0, its data in $tmp/data) and sets $url. At exit the named
# sandboxes are destroyed, cellad is stopped and $tmp is removed. Also: bench_sandbox,
# the SDK bench program's process (sdk_start, ask, sdk_stop), rt_rounds, fig, median, best
# and bench_figures.
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

# bench_cellad IMAGES NAME...: cellad on IMAGES (and the array bench_cellad_args, if set),
# its URL in $url; the sandboxes NAME... are destroyed at exit.
bench_cellad() {
        local images=$1
        shift
        bench_sandboxes=("$@")
        "$BUILD/cellad" --listen 127.0.0.1:0 --data-dir "$tmp/data" --images "$images" \
                --pool 0 --log-level warn ${bench_cellad_args[@]+"${bench_cellad_args[@]}"} \
                >"$tmp/log" 2>&1 &
        cellad_pid=$!
        for _ in $(seq 1 300); do
                url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/log" | head -n 1) || true
                [ -n "$url" ] && break
                sleep 0.1
        done
        [ -n "$url" ] || { cat "$tmp/log" >&2; exit 1; }
}

# bench_sandbox NAME: bench_cellad on $IMAGES with the one sandbox NAME, made now and kept
# from sleeping.
bench_sandbox() {
        bench_cellad "$IMAGES" "$1"
        curl -sS -f -X PUT "$url/v1/sandboxes/$1" -H 'Content-Type: application/json' \
                -d '{"keepAlive":true}' >/dev/null
}

# fig LINE FIELD: the number after FIELD= in LINE.
fig() {
        echo "$1" | grep -o "$2=[0-9.]*" | cut -d= -f2
}

# The median and the largest of the numbers on stdin, one a line.
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
best() { sort -n | tail -n 1; }

# sdk_start CMD...: an SDK's bench program, in one process for the whole run (a server
# using the SDK lives long); `ask LINE` sends it a command and answers its one line of
# figures; sdk_stop ends it.
sdk_start() {
        sdk_cmd=$*
        coproc SDK { exec "$@"; }
}
ask() {
        local line
        echo "$1" >&"${SDK[1]}"
        read -r line <&"${SDK[0]}" || { echo "$sdk_cmd failed" >&2; exit 1; }
        echo "$line"
}
sdk_stop() {
        exec {SDK[1]}>&-
        wait "$SDK_PID" || true
}

# rt_rounds SANDBOX: ROUNDS rounds of N exec('true') round trips, libcella's
# $BUILD/bench/sdk-client and the SDK (ask) taking turns; sets C50 C95 (libcella) and
# S50 S95 (the SDK), the medians of the rounds' p50 and p95.
rt_rounds() {
        local c50=() c95=() s50=() s95=() r a b
        for r in $(seq 1 "$ROUNDS"); do
                a=$("$BUILD/bench/sdk-client" "$url" "$1" rt "$N")
                b=$(ask "rt $N")
                echo "round $r: libcella $a; sdk $b" >&2
                c50+=("$(fig "$a" p50_us)") c95+=("$(fig "$a" p95_us)")
                s50+=("$(fig "$b" p50_us)") s95+=("$(fig "$b" p95_us)")
        done
        C50=$(printf '%s\n' "${c50[@]}" | median) C95=$(printf '%s\n' "${c95[@]}" | median)
        S50=$(printf '%s\n' "${s50[@]}" | median) S95=$(printf '%s\n' "${s95[@]}" | median)
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
