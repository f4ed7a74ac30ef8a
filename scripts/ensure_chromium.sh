#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the explorer's browser tests (tests/synth/report/test_explorer_browser.py).
# Does nothing when /usr/bin/chromium and /usr/bin/chromedriver are there; otherwise installs the packages
# chromium and chromium-driver with apt-get, as root or through sudo.
set -euo pipefail

if [ "${HOPFORGE_SKIP_BROWSER:-}" = 1 ]; then
    exit 0  # the browser tests skip themselves
fi
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: no apt-get here; install Chromium and ChromeDriver as /usr/bin/chromium and" \
         "/usr/bin/chromedriver, or set HOPFORGE_SKIP_BROWSER=1 to skip the browser tests" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
else
    echo "ensure_chromium: not root and no sudo; run as root: apt-get install chromium chromium-driver" >&2
    exit 1
fi
echo "ensure_chromium: installing Debian's chromium and chromium-driver" >&2
export DEBIAN_FRONTEND=noninteractive
${SUDO[@]+"${SUDO[@]}"} apt-get update -qq
${SUDO[@]+"${SUDO[@]}"} apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
test -x /usr/bin/chromium && test -x /usr/bin/chromedriver
