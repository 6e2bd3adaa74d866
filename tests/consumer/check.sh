#!/usr/bin/env bash
# Usage: check.sh DAFUSE_SOURCE_DIR [CXX]
# Builds and runs tests/consumer outside dafuse's tree as downstream projects take dafuse: a Meson
# subproject; a Make project through pkg-config against an installed dafuse; CMake through
# FetchContent of the source tree and through find_package of an installed dafuse moved to another
# prefix (both package files find the headers from their own place); the FetchContent build
# precompiles the umbrella header (docs/usage.md, "Compile times"). Also checks that Meson and
# CMake install the same files, and that `meson install` installs dafuse-train (with its headers
# and prebuilt part).
set -euo pipefail
src=$(cd "$1" && pwd)
# The C++ compiler every build here uses (Meson, Make and CMake all read CXX).
[ -n "${2:-}" ] && export CXX="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "consumer: $*" >&2; exit 1; }

echo "== Meson subproject"
mkdir -p "$work/meson/subprojects"
cp -r "$src/tests/consumer/main.cpp" "$src/tests/consumer/meson.build" "$src/tests/consumer/pch" \
  "$work/meson/"
ln -s "$src" "$work/meson/subprojects/dafuse"
meson setup "$work/meson/build" "$work/meson" >/dev/null
meson compile -C "$work/meson/build" >/dev/null
ls "$work"/meson/build/consumer.p/*.gch >/dev/null 2>&1 || ls "$work"/meson/build/consumer.p/*.pch \
  >/dev/null 2>&1 || fail "the Meson build did not precompile dafuse.hpp"
"$work/meson/build/consumer"

echo "== pkg-config and make"
meson setup "$work/install-build" "$src" -Dtests=disabled -Dcli=disabled --prefix "$work/prefix" \
  >/dev/null
meson install -C "$work/install-build" >/dev/null
pc_dir="$work/prefix/share/pkgconfig"
[ -f "$pc_dir/dafuse.pc" ] || fail "no dafuse.pc in share/pkgconfig"
mkdir -p "$work/make"
cp "$src/tests/consumer/main.cpp" "$src/tests/consumer/Makefile" "$work/make/"
PKG_CONFIG_PATH="$pc_dir" make -s -C "$work/make" consumer
"$work/make/consumer"

echo "== relocated: pkg-config --define-prefix"
cp -r "$work/prefix" "$work/moved"
cflags=$(PKG_CONFIG_PATH="$work/moved/share/pkgconfig" pkg-config --define-prefix --cflags dafuse)
case "$cflags" in
  *"-I$work/moved/include"*) ;;
  *) fail "pkg-config --define-prefix gave '$cflags', expected -I$work/moved/include" ;;
esac

echo "== CMake: FetchContent of the source tree"
cmake_consumer() {  # BUILD_DIR CMAKE_ARGS...
  local dir=$1; shift
  cmake -S "$work/cmake" -B "$dir" "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; fail "cmake failed"; }
  cmake --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; fail "cmake --build failed"; }
  "$dir/consumer"
}
mkdir -p "$work/cmake"
cp "$src/tests/consumer/main.cpp" "$src/tests/consumer/CMakeLists.txt" "$work/cmake/"
cmake_consumer "$work/cmake-fetch" -DDAFUSE_SOURCE_DIR="$src" -DDAFUSE_CONSUMER_PCH=ON
grep -q "dafuse/dafuse.hpp" "$work/cmake-fetch/CMakeFiles/consumer.dir/cmake_pch.hxx" ||
  fail "the FetchContent build did not precompile dafuse.hpp"

echo "== CMake: find_package of the Meson install, moved"
cmake_consumer "$work/cmake-found" -DCMAKE_PREFIX_PATH="$work/moved"

echo "== CMake and Meson install the same files"
cmake -S "$src" -B "$work/cmake-install-build" -DCMAKE_INSTALL_PREFIX="$work/cmake-prefix" \
  >/dev/null
cmake --install "$work/cmake-install-build" >/dev/null
# CMake's install has no .pc (pkg-config users install with Meson); the rest must match.
diff <(cd "$work/prefix" && find . -type f -not -name dafuse.pc | sort) \
     <(cd "$work/cmake-prefix" && find . -type f | sort) || fail "the installs differ"
cmake -S "$work/cmake" -B "$work/cmake-found2" -DCMAKE_PREFIX_PATH="$work/cmake-prefix" >/dev/null \
  || fail "find_package of the CMake install failed"

echo "== meson install installs dafuse-train"
meson setup "$work/cli-build" "$src" -Dtests=disabled --prefix "$work/cli-prefix" >/dev/null
meson introspect --installed "$work/cli-build" | grep -q '"[^"]*/bin/dafuse-train"' \
  || fail "meson install would not install bin/dafuse-train"
# with the sources it compiles a network given on its command line from (docs/cli.md).
meson introspect --installed "$work/cli-build" | grep -q '"[^"]*/share/dafuse/dafuse-train/run.hpp"' \
  || fail "meson install would not install dafuse-train's sources for its networks"
# and the prebuilt part a network's program links (apps/dafuse_train/meson.build, issue 47).
meson introspect --installed "$work/cli-build" | grep -q '"[^"]*/dafuse-train/dafuse-train-cli.o"' \
  || fail "meson install would not install dafuse-train's prebuilt part for its networks"
echo "consumer: all builds passed"
