#!/usr/bin/env bash
# Profiles benchmarks and commits their flamegraphs to the results site: for each NAME (an exact
# benchmark name of the grid), runs it with `--profile` on the offline runner and copies the
# flamegraph of its measured step to docs/site/flamegraphs/NAME.svg, which the site's benchmark
# tables link (tests/readme.rs fails on a flamegraph whose name is no benchmark of the grid).
#
#   scripts/site-flamegraphs.sh                     # the nine users/orders steps, journal_memory_temp_file
#   scripts/site-flamegraphs.sh NAME [NAME ...]
#
# Then run scripts/report.sh (or the readme test with STABLEBENCH_REGENERATE_README=1) so the
# tables link them.
source "$(dirname "$0")/lib.sh"

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for step in insert_users_100k insert_orders_1m create_indexes_1m select_join_1m select_like_100k \
    insert_orders_100_indexed delete_orders_1k_indexed insert_orders_1m_indexed delete_orders_100k_rollback; do
    names+=("sqlite_${step}_journal_memory_temp_file")
  done
fi

ensure_rust
"$ROOT/scripts/build.sh" bench
cargo build --locked --release -p stablebench-runner
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$ROOT/docs/site/flamegraphs"
for name in "${names[@]}"; do
  log "profiling $name"
  # The pattern is a substring: longer names that contain it run too, and are not copied.
  "$ROOT/target/release/stablebench-runner" bench "$name" --no-build --hide-results --less-verbose \
    --profile --profile-dir "$out" >&2
  [ -f "$out/$name.step.svg" ] || die "no flamegraph for $name: is it a benchmark of canbench.yml's canister?"
  cp "$out/$name.step.svg" "$ROOT/docs/site/flamegraphs/$name.svg"
done
log "wrote ${#names[@]} flamegraphs to docs/site/flamegraphs/"
