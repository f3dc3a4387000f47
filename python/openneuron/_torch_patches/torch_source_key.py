"""PyTorch's `torch_key` without re-reading torch's sources in every process.

Every AOTAutograd cache key (ours too) includes `torch_key()`: a SHA-256 over
the source of every module of the installed torch package, which PyTorch
2.13 recomputes by reading and hashing ~2,000 files in each new process
(0.11-0.13 s here, a large part of a warm start of a small graph). Here the digest is
remembered in our compile cache under a fingerprint of those files' stat
data (name, size, modification time, inode: what make and ccache's direct
mode trust), and handed to PyTorch through the setter its cached function
provides. Any file replaced, edited or added gives a new fingerprint and the
digest is computed again by PyTorch itself, so the value is always the one
PyTorch would compute; a memo file that is not a well-formed digest is
ignored and rewritten."""
from . import require_torch

require_torch(__name__)


import hashlib
import importlib.machinery
import os

import torch
from torch._inductor import codecache

_MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes())
# Files torch_key() hashes besides the modules (see codecache.torch_key).
_EXTRA_FILES = ("_inductor/codegen/aoti_runtime/interface.cpp", "_inductor/script.ld")
_DIGEST_BYTES = 32

_primed = False


def _is_package(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, "__init__" + s)) for s in _MODULE_SUFFIXES)


def _stat_line(path: str, st: os.stat_result) -> bytes:
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode()


def fingerprint(root: str) -> str:
    """Hex digest of the stat data of every file torch_key() reads under root:
    module files of root and of its packages, recursively (as pkgutil walks
    them), and the extra files."""
    h = hashlib.sha256(f"{torch.__version__}\0{root}\n".encode())
    pending = [root]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if "." not in e.name and _is_package(e.path):
                    pending.append(e.path)
            elif e.name.endswith(_MODULE_SUFFIXES):
                h.update(_stat_line(e.path, e.stat()))
    for rel in _EXTRA_FILES:
        path = os.path.join(root, rel)
        if os.path.exists(path):
            h.update(_stat_line(path, os.stat(path)))
    return h.hexdigest()


def _read_digest(path: str) -> bytes | None:
    try:
        with open(path) as f:
            text = f.read().strip()
        digest = bytes.fromhex(text)
    except (OSError, ValueError):
        return None
    return digest if len(digest) == _DIGEST_BYTES else None


def _write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def prime(cache_dir: str) -> None:
    """Before the first cache key of this process: sets torch_key() from the
    memo in cache_dir, or computes it and writes the memo. Once per process;
    a failure only costs the time PyTorch would have spent anyway."""
    global _primed
    if _primed:
        return
    _primed = True
    try:
        memo = os.path.join(cache_dir, "torch-source-keys", fingerprint(codecache._TORCH_PATH))
        digest = _read_digest(memo)
        if digest is None:
            _write_atomically(memo, codecache.torch_key().hex() + "\n")
            return
        codecache.torch_key.set(digest)
    except (OSError, RuntimeError):  # unwritable cache; or the key was already computed here
        pass
