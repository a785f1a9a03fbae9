#!/usr/bin/env bash
# Installs what the browser test drives: Debian's chromium and CJK fonts (for the Chinese screenshots).
# Never uses `playwright install` (it downloads a browser build). If apt is unavailable, says why and
# exits 0 so that only tests/test_browser.py skips.
set -u

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
if ! fc-list 2>/dev/null | grep -qi "noto.*cjk"; then
    missing+=(fonts-noto-cjk)
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "browser deps: chromium and fonts-noto-cjk already present"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser deps: apt-get not found; cannot install ${missing[*]} — the browser test will be skipped"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "browser deps: not root; cannot install ${missing[*]} — run 'sudo apt-get install -y ${missing[*]}'" \
         "or the browser test will be skipped"
    exit 0
fi
echo "browser deps: installing ${missing[*]}"
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; }; then
    echo "browser deps: apt-get failed (offline mirror?); the browser test will be skipped"
fi
exit 0
