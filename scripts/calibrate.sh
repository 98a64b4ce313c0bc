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
# `stablebench-runner bench --no-build --csv` there and pairs every benchmark (total and scopes:
# instructions, heap_increase, stable_memory_increase, calls) with the canbench_results.yml that
# canbench's CI recorded on PocketIC at that commit. It writes the pairs to calibration/results.csv
# and each set's pinned fields, the run's date and the runner's commit to calibration/sets.csv
# (the rows of sets not run stay). Then
#   STABLEBENCH_REGENERATE_CALIBRATION=1 cargo test --release --locked -p stablebench-report --test calibration
# regenerates docs/calibration.md's figures from those files (the test fails while they differ);
# the doc explains the deviations.
#
#   STABLEBENCH_CALIB_DIR   cache for clones and outputs (default ~/.cache/stablebench/calibration)
#   STABLEBENCH_RUNNER      the runner binary to calibrate (default: build this checkout's)
#   STABLEBENCH_RUNNER_REV  the commit that binary was built from, for sets.csv (default: unknown)
#   CARGO_BUILD_JOBS        as usual (1 on a shared machine)
#
# Needs git, rustup and python3 (the pairing is a small standard-library script below).
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
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
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
runner_rev=${STABLEBENCH_RUNNER_REV:-unknown}
if [ -z "$runner" ]; then
  ensure_rust
  log "building the offline runner"
  cargo build --locked --release -p stablebench-runner >&2
  runner=$ROOT/target/release/stablebench-runner
  # Dirty only where the runner is built from (this run itself rewrites calibration/).
  runner_rev=$(git -C "$ROOT" rev-parse --short=7 HEAD)$(git -C "$ROOT" diff --quiet HEAD -- runner grid Cargo.toml Cargo.lock || echo -dirty)
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
pair_args=("$ROOT/calibration" "$(date -u +%F)" "$runner_rev")
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
    pair_args+=("$name" "$url" "$commit" "$tc" "$canbench_version" "$pocketic" "$d" "$out/${label//\//-}.committed.yml" "$out/${label//\//-}.runner.csv")
  done
done
[ ${#pair_args[@]} -gt 3 ] || die "no set selected"

# The pairing: canbench's results YAML (fixed layout) against the runner's CSV, into
# calibration/results.csv and calibration/sets.csv (report/tests/calibration.rs reads both).
python3 - "${pair_args[@]}" <<'PY'
import csv
import os
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


def side(m, scope):
    """One side's four fields of results.csv, empty where the side has no such row."""
    if not m:
        return ["", "", "", ""]
    fields = [m[k] for k in ("instructions", "heap_increase", "stable_memory_increase")]
    return [str(v) for v in fields] + [str(m.get("calls", "")) if scope else ""]


def pairs(set_name, directory, committed, ours):
    """The rows of one directory: each benchmark's total, then its scopes, both sides."""
    for name in set(committed) | set(ours):
        c, o = committed.get(name, {}), ours.get(name, {})
        yield [set_name, directory, name, ""] + side(c.get("total"), "") + side(o.get("total"), "")
        for s in set(c.get("scopes", {})) | set(o.get("scopes", {})):
            cm, om = c.get("scopes", {}).get(s), o.get("scopes", {}).get(s)
            yield [set_name, directory, name, s] + side(cm, s) + side(om, s)


def merge(path, header, rows, ran):
    """Writes `rows`, and the rows of `path` of sets not run now, sorted; fields are plain."""
    kept = []
    if os.path.exists(path):
        with open(path, newline="") as f:
            kept = [r for r in list(csv.reader(f))[1:] if r and r[0] not in ran]
    rows = sorted(kept + rows)
    bad = [r for r in rows if any("," in v or '"' in v for v in r)]
    if bad:
        sys.exit(f"calibrate.sh: a field with a comma or a quote: {bad[0]}")
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return len(rows)


out_dir, run_date, runner_rev, *args = sys.argv[1:]
rows, sets = [], {}
for i in range(0, len(args), 9):
    set_name, url, commit, tc, canbench, pocketic, directory, committed_path, csv_path = args[i : i + 9]
    sets[set_name] = [set_name, url, commit, tc, canbench, pocketic, run_date, runner_rev]
    rows.extend(pairs(set_name, directory, parse_yaml(committed_path), parse_csv(csv_path)))
sides = [f"{who}_{k}" for who in ("pocketic", "runner") for k in ("instructions", "heap_increase", "stable_memory_increase", "calls")]
os.makedirs(out_dir, exist_ok=True)
n = merge(f"{out_dir}/results.csv", ["set", "directory", "benchmark", "scope"] + sides, rows, sets)
merge(f"{out_dir}/sets.csv", "set,repository,commit,toolchain,canbench,pocketic,run_date,runner".split(","), list(sets.values()), sets)
print(
    f"wrote {out_dir}/results.csv ({n} rows) and {out_dir}/sets.csv; now regenerate docs/calibration.md:\n"
    "  STABLEBENCH_REGENERATE_CALIBRATION=1 cargo test --release --locked -p stablebench-report --test calibration",
    file=sys.stderr,
)
PY
