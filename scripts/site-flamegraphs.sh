#!/usr/bin/env bash
# Profiles benchmarks and commits their profiles: for each NAME (an exact benchmark name of the
# grid), runs it with `--profile` on the offline runner and copies the flamegraph of its measured
# step to docs/site/flamegraphs/NAME.svg, which the site's benchmark tables link (report/tests/readme.rs
# fails on a flamegraph whose name is no benchmark of the grid), and the step's instructions per
# function to docs/profiles/NAME.tsv, which docs/breakdown.md's tables are generated from
# (runner/tests/breakdown.rs fails when a step's functions no longer add up to the committed
# results).
#
#   scripts/site-flamegraphs.sh                     # the nine users/orders steps, recommended profile
#   scripts/site-flamegraphs.sh NAME [NAME ...]
#
# Then run scripts/report.sh, which links the flamegraphs from the site's tables and regenerates
# docs/breakdown.md.
source "$(dirname "$0")/lib.sh"

names=("$@")
# The default set is runner/tests/breakdown.rs's (the grid's nine users/orders steps under the
# recommended profile); that test fails if docs/profiles/ holds any other set.
if [ ${#names[@]} -eq 0 ]; then
  for step in insert_users_100k insert_orders_1m create_indexes_1m select_join_1m select_like_100k \
    insert_orders_100_indexed delete_orders_1k_indexed insert_orders_1m_indexed delete_orders_100k_rollback; do
    names+=("sqlite_${step}_page_8k_temp_file")
  done
fi

ensure_rust
"$ROOT/scripts/build.sh" bench
cargo build --locked --release -p stablebench-runner
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$ROOT/docs/site/flamegraphs" "$ROOT/docs/profiles"
for name in "${names[@]}"; do
  log "profiling $name"
  # The pattern is a substring: longer names that contain it run too, and are not copied.
  "$ROOT/target/release/stablebench-runner" bench "$name" --no-build --hide-results --less-verbose \
    --profile --profile-dir "$out" >&2
  [ -f "$out/$name.step.svg" ] || die "no flamegraph for $name: is it a benchmark of canbench.yml's canister?"
  cp "$out/$name.step.svg" "$ROOT/docs/site/flamegraphs/$name.svg"
  cp "$out/$name.step.tsv" "$ROOT/docs/profiles/$name.tsv"
done
log "wrote ${#names[@]} flamegraphs to docs/site/flamegraphs/ and their functions to docs/profiles/"
