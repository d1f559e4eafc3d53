#!/usr/bin/env bash
# Debian's Chromium, for the test that opens a report in a headless browser.
# Skipped when it is already there; needs root and Debian's package index.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    echo "chromium: $(command -v chromium)"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install-chromium: not root: install Debian's 'chromium' package by hand" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium: installed $(command -v chromium)"
