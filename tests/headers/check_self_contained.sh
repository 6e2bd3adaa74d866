#!/usr/bin/env bash
# Usage: check_self_contained.sh INCLUDE_DIR -- COMPILER [FLAGS...]
# Every header under INCLUDE_DIR/dafuse compiles as the only include of a translation unit, with
# no warning (-fsyntax-only: parsing and instantiation, no object code). Two at a time, as the
# machine has two cores; every failure is listed with the compiler's first lines.
set -u
include=$(cd "$1" && pwd) || exit 1; shift
[ "$1" = "--" ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$include"
find dafuse -name '*.hpp' | sort >"$work/headers"
count=$(wc -l <"$work/headers")
[ "$count" -gt 0 ] || { echo "FAIL: no headers under $include/dafuse"; exit 1; }
export work include
# check HEADER COMPILER FLAGS...: one header; its diagnostics land in $work/<header>.log.
check() {
  local header=$1; shift
  local log="$work/${header//\//_}.log"
  if ! printf '#include <%s>\n' "$header" |
      "$@" -I"$include" -Wall -Wextra -Werror -fsyntax-only -x c++ - >"$log" 2>&1; then
    echo "$header" >>"$work/failed"
  fi
}
export -f check
xargs -P "${DAFUSE_CHECK_JOBS:-2}" -I{} bash -c 'check "$@"' _ {} "$@" <"$work/headers"
if [ -s "$work/failed" ]; then
  while read -r h; do
    echo "FAIL: <$h> does not compile on its own without warnings:"
    head -n 20 "$work/${h//\//_}.log"
  done <"$work/failed"
  exit 1
fi
echo "ok: $count headers compile on their own"
