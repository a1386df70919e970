#!/usr/bin/env bash
# Install the headless browser the studio's browser tests drive: Debian's chromium and
# chromium-driver (/usr/bin/chromium). Idempotent: does nothing once /usr/bin/chromium exists.
# Needs root (apt-get); nothing downloads a browser at test run time.
set -euo pipefail
if [[ -x /usr/bin/chromium ]]; then
  echo "install_browser: /usr/bin/chromium present, nothing to do"
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  echo "install_browser: /usr/bin/chromium is missing and installing it needs root:" >&2
  echo "  run 'sudo apt-get install -y chromium chromium-driver' (the studio browser tests skip without it)" >&2
  exit 0
fi
echo "install_browser: apt-get update"
DEBIAN_FRONTEND=noninteractive apt-get update -q
echo "install_browser: apt-get install chromium chromium-driver"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
echo "install_browser: $(/usr/bin/chromium --version)"
