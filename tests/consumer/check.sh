#!/usr/bin/env bash
# Usage: check.sh DAFUSE_SOURCE_DIR
# Builds and runs tests/consumer twice, outside dafuse's tree: as a Meson project that uses dafuse
# as a subproject, and as a Make project that finds an installed dafuse through pkg-config.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== Meson subproject"
mkdir -p "$work/meson/subprojects"
cp "$src/tests/consumer/main.cpp" "$src/tests/consumer/meson.build" "$work/meson/"
ln -s "$src" "$work/meson/subprojects/dafuse"
meson setup "$work/meson/build" "$work/meson" >/dev/null
meson compile -C "$work/meson/build" >/dev/null
"$work/meson/build/consumer"

echo "== pkg-config and make"
meson setup "$work/install-build" "$src" -Dtests=disabled --prefix "$work/prefix" >/dev/null
meson install -C "$work/install-build" >/dev/null
pc=$(dirname "$(find "$work/prefix" -name dafuse.pc | head -n 1)")
mkdir -p "$work/make"
cp "$src/tests/consumer/main.cpp" "$src/tests/consumer/Makefile" "$work/make/"
PKG_CONFIG_PATH="$pc" make -s -C "$work/make" consumer
"$work/make/consumer"
