#!/usr/bin/env bash
# The README's benchmark command: builds the bench wasm and runs the nine benchmarks.
#
#   scripts/bench.sh [canbench arguments...]
#
# Runs real canbench (PocketIC) when it is installed. The offline runner that runs the same wasm
# on wasmtime with the IC's instruction accounting is the next piece of work (issue 3); until it
# lands, a machine without canbench gets a clear message and no numbers.
source "$(dirname "$0")/lib.sh"

if command -v canbench >/dev/null; then
  exec canbench "$@"
fi
"$ROOT/scripts/build.sh" bench
die "canbench is not installed and the offline runner does not exist yet: install canbench 0.7 (cargo install canbench --version 0.7.0) on a machine that can download PocketIC, then run scripts/bench.sh again"
