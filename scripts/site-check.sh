#!/usr/bin/env bash
# Opens the results site (docs/site/, written by scripts/report.sh) in headless Chromium, the way a
# reader's browser does: every page must load without a console error or a resource that fails to
# load (a missing image, stylesheet or script), and index.html and kv.html (a workload page) are
# saved as screenshots in docs/site/screenshots/ (the README shows the index's).
#
#   scripts/site-check.sh            # installs Debian's chromium package if it is missing
#
# First it loads a page with a deliberate error and a missing image and fails if Chromium's log
# does not show both, so a change in how Chromium logs cannot turn the check into one that always
# passes. Not part of scripts/test.sh (it needs a browser and apt); run it after scripts/report.sh.
# tests/readme.rs checks, in every test run, that every link and image of the site resolves.
source "$(dirname "$0")/lib.sh"

SITE=$ROOT/docs/site
SHOTS=$SITE/screenshots

ensure_chromium() {
  for c in chromium chromium-browser; do
    if command -v "$c" >/dev/null; then CHROMIUM=$(command -v "$c"); return; fi
  done
  log "installing Debian's chromium package"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q chromium >&2 \
    || die "could not install chromium with apt-get"
  CHROMIUM=$(command -v chromium) || die "chromium installed but not on PATH"
}

# load URL [SCREENSHOT]: prints Chromium's log of loading URL (console messages and failed loads).
load() {
  local url=$1 shot=${2:-} args=()
  if [ -n "$shot" ]; then args=(--screenshot="$shot" --window-size=1280,1600 --hide-scrollbars); else args=(--dump-dom); fi
  # A fresh profile per page; --no-sandbox because CI containers run as root.
  local profile
  profile=$(mktemp -d)
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$profile" \
    --allow-file-access-from-files --enable-logging=stderr --v=1 --virtual-time-budget=2000 \
    "${args[@]}" "$url" 2>&1 >/dev/null || true
  rm -rf "$profile"
}

# problems LOG: what a Chromium log (--v=1) reports as wrong with a page: console errors, and every
# file the page asked for (FileURLLoader::Start) that does not exist.
problems() {
  grep -E ':CONSOLE[:(].*(Uncaught|Error)' <<<"$1" || true
  local url path
  while read -r url; do
    path=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(urllib.parse.urlsplit(sys.argv[1]).path))' "$url")
    [ -e "$path" ] || echo "missing file: $path"
  done < <(sed -n 's/.*FileURLLoader::Start: \(file:[^ ]*\).*/\1/p' <<<"$1")
}

ensure_chromium
[ -f "$SITE/index.html" ] || die "$SITE/index.html is missing: run scripts/report.sh first"

log "checking that the check can fail (a page with a script error and a missing image)"
canary=$(mktemp -d)
trap 'rm -rf "$canary"' EXIT
printf '<!DOCTYPE html><html><body><img src="missing.png"><script>undefined_function_of_the_canary();</script></body></html>\n' \
  > "$canary/canary.html"
found=$(problems "$(load "file://$canary/canary.html")")
grep -q 'undefined_function_of_the_canary' <<<"$found" && grep -q 'missing file: .*/missing.png' <<<"$found" \
  || die "Chromium's log did not report the canary page's errors; this check cannot be trusted:
$found"

mkdir -p "$SHOTS"
failed=0
for page in "$SITE"/*.html; do
  name=$(basename "$page" .html)
  shot=""
  case $name in index|kv) shot=$SHOTS/$name.png ;; esac
  found=$(problems "$(load "file://$page" "$shot")")
  if [ -n "$found" ]; then
    log "$name.html: $found"
    failed=1
  else
    log "$name.html: loaded without errors${shot:+ (screenshot $shot)}"
  fi
done
[ "$failed" -eq 0 ] || die "some pages of the site reported errors"
log "every page of docs/site loaded without errors; screenshots in docs/site/screenshots/"
