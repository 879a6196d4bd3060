#!/usr/bin/env bash
# web-build.sh OUT_DIR OUT_C - build the web console (web/) with Vite into
# OUT_DIR and write it as C into OUT_C (web/scripts/embed.mjs), for gpuboxd
# to embed. CMake runs it when a file under web/ changes (docs/web.md).
#
# The npm packages come from web/package-lock.json through `npm ci`, run
# again whenever the lock file changes (a stamp in node_modules remembers
# which lock file it was installed from).
set -euo pipefail
out_dir=$1
out_c=$2
cd "$(dirname "$0")/../web"

command -v npm >/dev/null || {
    echo "web-build: npm is missing; scripts/install-deps.sh build installs Node.js and npm" >&2
    exit 1
}
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.gpubox-lock
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
    echo "web-build: npm ci (web/package-lock.json)"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$lock_sum" >"$stamp"
fi
npx --no-install vite build --logLevel warn --outDir "$out_dir" --emptyOutDir
node scripts/embed.mjs "$out_dir" "$out_c"
