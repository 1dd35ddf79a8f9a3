#!/usr/bin/env bash
# Deploys the site.
set -euo pipefail
source ./lib.sh

# Prints a message with the time.
log() {
  echo "[$(date +%T)] $*"
}

function build {
  log "building"
  npm run build
}

deploy() (
  cd dist && rsync -a . "$1"
)

main() {
  build
  deploy "${1:-server:/srv}"
}

main "$@"
