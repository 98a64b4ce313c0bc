#!/usr/bin/env bash
# Opens the results site (docs/site/, written by scripts/report.sh) in headless Chromium, the way a
# reader's browser does: every page must load, without a console message of any level (the site's
# pages log nothing when they work) and without a resource that fails to load (a missing image,
# stylesheet or script). index.html and kv.html (a workload page) are also loaded as screenshots,
# saved in docs/site/screenshots/ (the README shows the index's) or in --shots DIR.
#
#   scripts/site-check.sh                               # installs Debian's chromium package if missing
#   scripts/site-check.sh --shots target/site/screenshots   # what scripts/test.sh (CI) runs
#
# A load counts only if Chromium exits 0, its log shows it requested the page, and it wrote what it
# was asked for (the DOM, ending in </html>, or a non-empty PNG): a crash or an empty log fails the
# check instead of passing it. First it loads a canary page with a deliberate script error, a
# console warning and a missing image, in both ways the pages are loaded (DOM and screenshot), and
# fails unless the log shows all three each time, so a change in how Chromium logs cannot turn the
# check into one that always passes. report/tests/readme.rs checks, without a browser, that every link and
# image of the site resolves.
source "$(dirname "$0")/lib.sh"

SITE=$ROOT/docs/site
SHOTS=$SITE/screenshots
while [ $# -gt 0 ]; do
  case $1 in
    --shots) [ $# -ge 2 ] || die "--shots needs a directory"; SHOTS=$2; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

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

# load URL dom|shot [PNG]: loads URL in headless Chromium and prints its log (console messages and
# the files it requested), in DOM mode (--dump-dom) or as a screenshot written to PNG. Fails, with
# the reason on stderr, when the page was not really loaded: Chromium exited with an error, the
# log does not show the page requested, or the DOM or the PNG is missing or empty.
load() {
  local url=$1 mode=$2 png=${3:-} args=() work rc=0
  work=$(mktemp -d)
  case $mode in
    dom) args=(--dump-dom) ;;
    shot) args=(--screenshot="$png" --window-size=1280,1600 --hide-scrollbars); rm -f "$png" ;;
  esac
  # A fresh profile per page; --no-sandbox because CI containers run as root; no background
  # networking, component updates or sync (a machine without internet refuses those connections).
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" \
    --disable-background-networking --disable-component-update --disable-sync --disable-quic \
    --allow-file-access-from-files --enable-logging=stderr --v=1 --virtual-time-budget=2000 \
    "${args[@]}" "$url" >"$work/out" 2>"$work/log" || rc=$?
  local why=""
  if [ "$rc" -ne 0 ]; then
    why="Chromium exited with status $rc"
  elif ! grep -qF "FileURLLoader::Start: $url" "$work/log"; then
    why="Chromium's log does not show the page requested ($(wc -c <"$work/log") bytes of log)"
  elif [ "$mode" = dom ] && ! grep -q '</html>' "$work/out"; then
    why="Chromium wrote no DOM"
  elif [ "$mode" = shot ] && [ ! -s "$png" ]; then
    why="Chromium wrote no screenshot"
  fi
  cat "$work/log"
  rm -rf "$work"
  [ -z "$why" ] || { echo "$url ($mode): $why" >&2; return 1; }
}

# problems LOG: what a Chromium log (--v=1) reports as wrong with a page: every console message
# (Chromium logs all levels, log to error, as INFO:CONSOLE), and every file the page asked for
# (FileURLLoader::Start) that does not exist.
problems() {
  grep -E ':CONSOLE[:(]' <<<"$1" || true
  local url path
  while read -r url; do
    path=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(urllib.parse.urlsplit(sys.argv[1]).path))' "$url")
    [ -e "$path" ] || echo "missing file: $path"
  done < <(sed -n 's/.*FileURLLoader::Start: \(file:[^ ]*\).*/\1/p' <<<"$1")
}

ensure_chromium
[ -f "$SITE/index.html" ] || die "$SITE/index.html is missing: run scripts/report.sh first"
command -v python3 >/dev/null || die "python3 is not installed (the check decodes file URLs with it)"

log "checking that the check can fail (a page with a script error, a console warning and a missing image)"
canary=$(mktemp -d)
trap 'rm -rf "$canary"' EXIT
printf '<!DOCTYPE html><html><body><img src="missing.png"><script>console.warn("warning_of_the_canary"); undefined_function_of_the_canary();</script></body></html>\n' \
  > "$canary/canary.html"
for mode in dom shot; do
  out=$(load "file://$canary/canary.html" "$mode" "$canary/canary.png") \
    || die "Chromium could not load the canary page ($mode): this check cannot run"
  found=$(problems "$out")
  grep -q 'undefined_function_of_the_canary' <<<"$found" && grep -q 'warning_of_the_canary' <<<"$found" \
    && grep -q 'missing file: .*/missing.png' <<<"$found" \
    || die "Chromium's log ($mode) did not report the canary page's three problems; this check cannot be trusted:
$found"
done

mkdir -p "$SHOTS"
failed=0
pages=0
for page in "$SITE"/*.html; do
  name=$(basename "$page" .html)
  runs=(dom)
  case $name in index | kv) runs+=(shot) ;; esac
  for mode in "${runs[@]}"; do
    shot=$SHOTS/$name.png
    if ! out=$(load "file://$page" "$mode" "$shot"); then
      log "$name.html ($mode): not loaded"
      failed=1
      continue
    fi
    found=$(problems "$out")
    if [ -n "$found" ]; then
      log "$name.html ($mode): $found"
      failed=1
    else
      note=""
      [ "$mode" = shot ] && note=" (screenshot $shot)"
      log "$name.html ($mode): loaded without errors$note"
    fi
  done
  pages=$((pages + 1))
done
[ "$pages" -gt 0 ] || die "no page in $SITE"
[ "$failed" -eq 0 ] || die "some pages of the site failed to load or reported problems"
log "all $pages pages of docs/site loaded without errors; screenshots in $SHOTS"
