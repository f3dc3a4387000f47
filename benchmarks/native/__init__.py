"""Native reference kernels, built with the system C compiler on first use."""
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def load(name: str) -> ctypes.CDLL:
    """benchmarks/native/NAME.c compiled with -O3 -march=native -fopenmp
    (cached by source hash in the temp dir) and loaded."""
    src = os.path.join(HERE, name + ".c")
    with open(src, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(tempfile.gettempdir(), f"openneuron-bench-{name}-{digest}.so")
    if not os.path.exists(out):
        cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
        if not cc:
            raise RuntimeError(f"no C compiler to build {src} (set CC)")
        tmp = out + f".{os.getpid()}.tmp"
        subprocess.run([cc, "-std=c11", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-o", tmp, src],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, out)
    return ctypes.CDLL(out)
