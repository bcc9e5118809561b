#!/usr/bin/env bash
# Installs Debian's Chromium for the web page's headless-browser test (serve_cli.rs), unless a
# Chromium is already on PATH or named by $CHROMIUM. Needs root or sudo; prints the browser's path.
set -euo pipefail
for name in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [ -n "$name" ] && command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    exit 0
  fi
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -q --no-install-recommends chromium >&2; then
  $sudo apt-get update -q >&2
  $sudo apt-get install -y -q --no-install-recommends chromium >&2
fi
command -v chromium
