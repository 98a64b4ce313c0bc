#!/usr/bin/env bash
# Calibrates the offline runner against canbench results recorded on PocketIC. NOT part of CI:
# it needs the network (git clone from GitHub, the Rust package registry, rustup toolchains) and
# about 45 minutes on 2 cores the first time (the builds; the runs themselves take about 10 minutes).
#
#   scripts/calibrate.sh [SET...] [--skip-build]
#
# SET is any of the names in SETS below (default: all). For each set it clones the repository
# at the pinned commit into the cache, installs the pinned toolchain with the wasm32-unknown-unknown
# target, builds the wasm exactly as each directory's canbench.yml build_cmd says, runs
# `stablebench-runner bench --no-build --csv` there and compares every benchmark (total and scopes:
# instructions, heap_increase, stable_memory_increase, calls) with the canbench_results.yml that
# canbench's CI recorded on PocketIC at that commit. Prints one Markdown table per directory and a
# summary per directory and per set. docs/calibration.md records a run and explains the deviations.
#
#   STABLEBENCH_CALIB_DIR   cache for clones and outputs (default ~/.cache/stablebench/calibration)
#   STABLEBENCH_RUNNER      the runner binary to calibrate (default: build this checkout's)
#   CARGO_BUILD_JOBS        as usual (1 on a shared machine)
#
# Needs git, rustup and python3 (the comparison is a small standard-library script below).
source "$(dirname "$0")/lib.sh"

CALIB_DIR=${STABLEBENCH_CALIB_DIR:-$HOME/.cache/stablebench/calibration}

# name | repository | commit | toolchain | canbench | PocketIC | benchmark directories
# The commit is the one whose canbench_results.yml files were recorded (their `version` is the
# canbench that wrote them; the PocketIC server is the one that canbench version pins).
SETS=(
  "canbench-ef6e4d4|https://github.com/dfinity/canbench|ef6e4d4c35c82cb48312a82ca2c22586ad780acf|1.93.1|0.4.1|13.0.0|examples/fibonacci examples/btreemap_vs_hashmap"
  "canbench-e560c66|https://github.com/dfinity/canbench|e560c66fd377c3e1cf1638008c19f3d9fa06408e|1.86.0|0.2.1|9.0.1|examples/fibonacci examples/btreemap_vs_hashmap"
  "stable-structures|https://github.com/dfinity/stable-structures|ce9ae9b67d2687f4ab3c475b545ebe46ab500a2f|1.84.0|0.2.0|9.0.1|benchmarks/vec benchmarks/memory_manager benchmarks/nns benchmarks/io_chunks benchmarks/btreeset benchmarks/btreemap"
)

skip_build=false
wanted=()
for a in "$@"; do
  case "$a" in
    --skip-build) skip_build=true ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) die "unknown option $a" ;;
    *) wanted+=("$a") ;;
  esac
done
for w in "${wanted[@]}"; do
  printf '%s\n' "${SETS[@]}" | cut -d'|' -f1 | grep -qx "$w" || die "unknown set $w (sets: $(printf '%s\n' "${SETS[@]}" | cut -d'|' -f1 | tr '\n' ' '))"
done

command -v git >/dev/null || die "git is not installed"
command -v python3 >/dev/null || die "python3 is not installed (the comparison needs it)"
command -v rustup >/dev/null || die "rustup is not installed: see https://rustup.rs"

# The runner: a given binary, or this checkout's.
runner=${STABLEBENCH_RUNNER:-}
if [ -z "$runner" ]; then
  ensure_rust
  log "building the offline runner"
  cargo build --locked --release -p stablebench-runner >&2
  runner=$ROOT/target/release/stablebench-runner
fi
[ -x "$runner" ] || die "runner $runner is not an executable"

# Installs toolchain $1 with the wasm32-unknown-unknown target (RUSTUP_AUTO_INSTALL=0 machines do
# not install what a rust-toolchain.toml names by themselves).
ensure_toolchain() {
  local tc=$1
  if ! rustup toolchain list | grep -q "^$tc-"; then
    log "installing Rust $tc"
    rustup toolchain install "$tc" --profile minimal --target wasm32-unknown-unknown >&2 || die "could not install Rust $tc"
  fi
  if ! rustup target list --installed --toolchain "$tc" | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown --toolchain "$tc" >&2 || die "could not add wasm32-unknown-unknown to Rust $tc"
  fi
}

# Clones repository $1 at commit $2 into $3 (once).
ensure_clone() {
  local url=$1 commit=$2 dir=$3
  if [ -d "$dir/.git" ] && [ "$(git -C "$dir" rev-parse HEAD)" = "$commit" ]; then return; fi
  rm -rf "$dir"
  log "cloning $url at $commit"
  git clone --quiet "$url" "$dir" || die "could not clone $url"
  git -C "$dir" checkout --quiet --detach "$commit" || die "commit $commit not found in $url"
}

out=$CALIB_DIR/out
mkdir -p "$out"
compare_args=()
for entry in "${SETS[@]}"; do
  IFS='|' read -r name url commit tc canbench_version pocketic dirs <<<"$entry"
  if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$name"; then continue; fi
  src=$CALIB_DIR/src/$name
  ensure_clone "$url" "$commit" "$src"
  ensure_toolchain "$tc"
  for d in $dirs; do
    label=$name/$(basename "$d")
    [ -f "$src/$d/canbench.yml" ] || die "$src/$d has no canbench.yml"
    if [ "$skip_build" = false ]; then
      build_cmd=$(sed -n 's/^build_cmd: *//p' "$src/$d/canbench.yml")
      [ -n "$build_cmd" ] || die "$src/$d/canbench.yml has no build_cmd"
      log "$label: building with Rust $tc: $build_cmd"
      # The toolchain the repository pins (rust-toolchain.toml says the same); the wasm_path in
      # canbench.yml is relative to the repository's own target directory.
      (cd "$src/$d" && env -u CARGO_TARGET_DIR RUSTUP_TOOLCHAIN="$tc" bash -c "$build_cmd") >&2 \
        || die "$label: build failed"
    fi
    log "$label: running the runner"
    git -C "$src" show "$commit:$d/canbench_results.yml" >"$out/${label//\//-}.committed.yml" \
      || die "$label: no committed canbench_results.yml"
    rm -f "$src/$d/canbench_results.csv"
    (cd "$src/$d" && "$runner" bench --no-build --csv --less-verbose --hide-results) >"$out/${label//\//-}.log" 2>&1 \
      || die "$label: the runner failed (see $out/${label//\//-}.log)"
    cp "$src/$d/canbench_results.csv" "$out/${label//\//-}.runner.csv"
    # Leave the clone as checked out.
    git -C "$src" checkout --quiet -- "$d" 2>/dev/null || true
    compare_args+=("$name" "$label" "$out/${label//\//-}.committed.yml" "$out/${label//\//-}.runner.csv" "$tc" "$canbench_version" "$pocketic" "$commit")
  done
done
[ ${#compare_args[@]} -gt 0 ] || die "no set selected"

# The comparison: canbench's results YAML (fixed layout) against the runner's CSV.
python3 - "${compare_args[@]}" <<'PY'
import csv
import statistics
import sys


def parse_yaml(path):
    """{bench: {"total": {...}, "scopes": {scope: {...}}}} from canbench's results file."""
    benches, bench, scope, section = {}, None, None, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip(" "))
            key, _, value = line.strip().partition(":")
            key, value = key.strip().strip("'\""), value.strip()
            if indent == 0:
                section = key
            elif section != "benches":
                continue
            elif indent == 2:
                bench = key
                benches[bench] = {"total": {}, "scopes": {}}
            elif indent == 4:
                scope = "total" if key == "total" else None
            elif indent == 6 and scope == "total":
                benches[bench]["total"][key] = int(value)
            elif indent == 6:
                scope = key
                benches[bench]["scopes"][scope] = {}
            elif indent == 8 and scope not in (None, "total"):
                benches[bench]["scopes"][scope][key] = int(value)
    return benches


def parse_csv(path):
    """The same shape from the runner's canbench CSV (rows `name` and `name::scope`)."""
    benches = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            name, _, scope = row["name"].partition("::")
            m = {k: int(row[k]) for k in ("instructions", "heap_increase", "stable_memory_increase")}
            b = benches.setdefault(name, {"total": {}, "scopes": {}})
            if scope:
                m["calls"] = int(row["scope_calls"])
                b["scopes"][scope] = m
            else:
                b["total"] = m
    return benches


def pct(ours, theirs):
    if theirs == 0:
        return 0.0 if ours == 0 else float("inf")
    return (ours - theirs) * 100.0 / theirs


def fmt_pct(x):
    if x == 0:
        return "0 %"
    if x == float("inf"):
        return "inf %"
    return f"{x:.2e} %" if x < 0.0001 else f"{x:.4f} %"


def summary(rows):
    """rows: [(name, dev %, exact)] of benchmark totals."""
    if not rows:
        return "0", "0", "-", "-"
    absd = [abs(d) for _, d, _ in rows]
    worst = max(rows, key=lambda r: abs(r[1]))
    return (
        str(len(rows)),
        str(sum(e for _, _, e in rows)),
        fmt_pct(statistics.median(absd)),
        "0 % (all equal)" if worst[1] == 0 else f"{fmt_pct(abs(worst[1]))} ({worst[0]})",
    )


args = sys.argv[1:]
groups = [args[i : i + 8] for i in range(0, len(args), 8)]
per_dir, per_set, meta = [], {}, {}
for set_name, label, committed_path, csv_path, tc, canbench, pocketic, commit in groups:
    meta[set_name] = (commit, tc, canbench, pocketic)
    committed, ours = parse_yaml(committed_path), parse_csv(csv_path)
    print(f"\n### {label} ({commit[:8]}, Rust {tc}, canbench {canbench}, PocketIC {pocketic})\n")
    print("| benchmark | scope | PocketIC | runner | Δ | Δ % | heap PocketIC/runner | stable PocketIC/runner | calls PocketIC/runner |")
    print("|---|---|---:|---:|---:|---:|---|---|---|")
    totals = []
    for name in sorted(set(committed) | set(ours)):
        c, o = committed.get(name), ours.get(name)
        if c is None or o is None:
            which = "runner only" if c is None else "PocketIC only"
            print(f"| {name} | | | | | {which} | | | |")
            continue
        items = [("", c["total"], o["total"])]
        for s in sorted(set(c["scopes"]) | set(o["scopes"])):
            items.append((s, c["scopes"].get(s), o["scopes"].get(s)))
        for scope, cm, om in items:
            if cm is None or om is None:
                print(f"| {name} | {scope} | | | | {'runner only' if cm is None else 'PocketIC only'} | | | |")
                continue
            d = pct(om["instructions"], cm["instructions"])
            exact = all(om.get(k) == cm.get(k) for k in ("instructions", "heap_increase", "stable_memory_increase"))
            if scope:
                exact = exact and om.get("calls") == cm.get("calls")
            calls = f"{cm.get('calls')}/{om.get('calls')}" if scope else ""
            print(
                f"| {name} | {scope} | {cm['instructions']} | {om['instructions']} | {om['instructions'] - cm['instructions']:+d} "
                f"| {d:+.4f}{'' if d == 0 or abs(d) >= 0.0001 else f' ({d:+.1e})'} | {cm['heap_increase']}/{om['heap_increase']} "
                f"| {cm['stable_memory_increase']}/{om['stable_memory_increase']} | {calls} |"
            )
            if not scope:
                totals.append((name, d, exact))
    per_dir.append((label, summary(totals), sum(1 for _, d, _ in totals if abs(d) > 0.1)))
    per_set.setdefault(set_name, []).extend(totals)

print("\n### Summary (benchmark totals; exact = instructions, heap_increase and stable_memory_increase all equal)\n")
print("| set / directory | benchmarks | exact | median abs Δ | max abs Δ (benchmark) | abs Δ > 0.1 % |")
print("|---|---:|---:|---:|---|---:|")
for label, (n, exact, med, worst), over in per_dir:
    print(f"| {label} | {n} | {exact} | {med} | {worst} | {over} |")
for set_name, rows in per_set.items():
    n, exact, med, worst = summary(rows)
    commit, tc, canbench, pocketic = meta[set_name]
    over = sum(1 for _, d, _ in rows if abs(d) > 0.1)
    print(f"| **{set_name}** ({commit[:8]}, Rust {tc}, canbench {canbench}, PocketIC {pocketic}) | {n} | {exact} | {med} | {worst} | {over} |")
PY
