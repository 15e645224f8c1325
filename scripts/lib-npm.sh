# Sourced by scripts/sdk-deps.sh and scripts/console-deps.sh: the one way this tree
# installs a package's npm dependencies. npm_ci_stale DIR WHO runs `npm ci` in DIR when its
# node_modules is missing or older than its package.json / package-lock.json (a stamp
# file in node_modules records the last successful install), and does nothing otherwise:
# nothing touches the network unless the lock file changed or node_modules is gone.
# WHO names the caller in what it prints.
npm_ci_stale() {
        local dir=$1 who=$2 stamp=$1/node_modules/.cella-npm-ci.stamp
        if [ ! -d "$dir/node_modules" ] || [ ! -f "$stamp" ] ||
                [ "$dir/package-lock.json" -nt "$stamp" ] || [ "$dir/package.json" -nt "$stamp" ]; then
                echo "$who: npm ci in $dir"
                (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline)
                touch "$stamp"
        fi
}
