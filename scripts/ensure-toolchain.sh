#!/usr/bin/env bash
# Makes the toolchain pinned in rust-toolchain.toml available to rustup. Where it is
# missing but the machine's `stable` is that very version (an offline machine cannot
# download it), stable is linked under the pinned name; otherwise rustup installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
pinned=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
if rustup run "$pinned" rustc --version >/dev/null 2>&1; then
  exit 0
fi
stable=$(rustup run stable rustc --version 2>/dev/null | awk '{print $2}')
if [ "$stable" = "$pinned" ]; then
  echo "ensure-toolchain: linking stable ($stable) as $pinned" >&2
  rustup toolchain link "$pinned" "$(rustup run stable rustc --print sysroot)"
else
  echo "ensure-toolchain: installing $pinned" >&2
  rustup toolchain install "$pinned" --profile minimal --component clippy,rustfmt
fi
