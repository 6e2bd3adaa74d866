#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Links one copy of dafuse-train (a static library built for one instruction set) into one
relocatable object whose symbols no other copy shares, for a portable build (portable.cpp).

Every copy instantiates the same inline functions and templates (dafuse's, Eigen's, the standard
library's) under the same names, each compiled for its own -march. Linked side by side, the linker
would keep one of each, so the baseline copy could run AVX-512 code. Here each copy is linked
alone (ld -r: its own duplicates merged), every symbol it defines gets the copy's prefix, COMDAT
group signatures included, and all but its two entry points are made local.

A copy's static initialisers are compiled for its -march too, so they must not run at load time:
its .init_array becomes section dafuse_init_NAME, which portable.cpp runs once it has chosen the
copy. A copy with other load- or exit-time code (.preinit_array, .ctors, .fini_array, ...) is
refused.

Usage: portable_isolate.py NAME OBJCOPY NM READELF INPUT.a OUTPUT.o CXX [CXX ARGS...]
"""
import re
import subprocess
import sys

ENTRIES = ("dafuse_train_entry", "dafuse_train_missing_features")


def main(argv):
    if len(argv) < 8:
        sys.exit(__doc__)
    name, objcopy, nm, readelf, archive, output = argv[1:7]
    cxx = argv[7:]
    linked = output + ".linked.o"
    subprocess.run(cxx + ["-r", "-nostdlib", "-Wl,--whole-archive", archive,
                          "-Wl,--no-whole-archive", "-o", linked], check=True)
    listing = subprocess.run([nm, "--defined-only", "-P", linked], check=True,
                             capture_output=True, text=True).stdout
    defined = sorted({line.split()[0] for line in listing.splitlines() if line.strip()})
    missing = [e for e in ENTRIES if e not in defined]
    if missing:
        sys.exit(f"portable_isolate.py: {archive} defines no {', '.join(missing)} (main.cpp "
                 "built without -DDAFUSE_TRAIN_VARIANT?)")
    renames = output + ".renames"
    with open(renames, "w", encoding="ascii") as f:
        for symbol in defined:
            renamed = f"{symbol}_{name}" if symbol in ENTRIES else f"dafuse_{name}.{symbol}"
            f.write(f"{symbol} {renamed}\n")
    sections = subprocess.run([readelf, "-S", "-W", linked], check=True, capture_output=True,
                              text=True).stdout
    inits, refused = [], []
    for match in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)", sections, re.MULTILINE):
        section, kind = match.groups()
        if kind == "INIT_ARRAY" and section == ".init_array":
            inits.append(section)
        elif kind in ("INIT_ARRAY", "FINI_ARRAY", "PREINIT_ARRAY") or section in (".ctors",
                                                                                 ".dtors"):
            refused.append(section)
    if refused:
        sys.exit(f"portable_isolate.py: {archive} has {', '.join(refused)}, which would run "
                 "whether or not the copy is chosen")
    renamed_inits = [arg for s in inits for arg in ("--rename-section",
                                                     f"{s}=dafuse_init_{name}")]
    keep = [arg for e in ENTRIES for arg in ("--keep-global-symbol", f"{e}_{name}")]
    subprocess.run([objcopy, "--redefine-syms", renames] + renamed_inits + keep + [linked, output], check=True)


if __name__ == "__main__":
    main(sys.argv)
