"""Which BLAS the vector scripts run on (imported before numpy and torch).

Debian's torch does its float32 matmuls through the system ``libblas.so.3``; OpenBLAS (whose
kernels depend on the CPU) gives results that differ from the committed vectors in the last bits.
The committed files were made with Debian's reference (netlib) BLAS, so when it is installed
(``libblas3``, ``liblapack3``) ``use_reference_blas()`` re-executes the script once with those
folders first on ``LD_LIBRARY_PATH``. ``DAFUSE_VECTORS_ANY_BLAS=1`` skips that.
"""

import os
import sys
import sysconfig

_ANY_BLAS = "DAFUSE_VECTORS_ANY_BLAS"
_REEXEC = "DAFUSE_VECTORS_REEXEC"


def netlib_dirs():
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    return [f"/usr/lib/{multiarch}/blas", f"/usr/lib/{multiarch}/lapack"]


def use_reference_blas():
    """Re-exec once with Debian's netlib BLAS/LAPACK first in the search path; call it before
    numpy and torch are imported."""
    if os.environ.get(_ANY_BLAS) or os.environ.get(_REEXEC):
        return
    dirs = netlib_dirs()
    if not os.path.exists(os.path.join(dirs[0], "libblas.so.3")):
        return
    env = dict(os.environ)
    env[_REEXEC] = "1"
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = ":".join(dirs + ([old] if old else []))
    print("re-executing with the reference (netlib) BLAS: LD_LIBRARY_PATH="
          + env["LD_LIBRARY_PATH"], flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def loaded_blas():
    """Paths of the BLAS/LAPACK libraries mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps.splitlines()
                   if ("blas" in line or "lapack" in line)
                   and line.split()[-1].startswith("/")})
