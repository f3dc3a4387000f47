"""torch_key() remembered across processes (_torch_patches/torch_source_key.py)."""
import os

from conftest import run_python
from openneuron._torch_patches import torch_source_key


def _tree(root):
    for rel, text in {"__init__.py": "", "a.py": "x = 1\n", "pkg/__init__.py": "", "pkg/b.py": "y = 2\n",
                      "plain_dir/c.py": "z = 3\n", "notes.txt": "not a module\n"}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _touch(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_fingerprint_follows_the_files_torch_key_reads(tmp_path):
    _tree(tmp_path)
    first = torch_source_key.fingerprint(str(tmp_path))
    assert torch_source_key.fingerprint(str(tmp_path)) == first
    # torch_key() reads modules of packages only (pkgutil's walk): other files
    # do not change it, so neither do they change the fingerprint.
    _touch(tmp_path / "plain_dir" / "c.py")
    _touch(tmp_path / "notes.txt")
    assert torch_source_key.fingerprint(str(tmp_path)) == first
    _touch(tmp_path / "pkg" / "b.py")  # an edited module
    edited = torch_source_key.fingerprint(str(tmp_path))
    assert edited != first
    (tmp_path / "pkg" / "new.py").write_text("")  # an added module
    assert torch_source_key.fingerprint(str(tmp_path)) not in (first, edited)


# Prints torch_key() and whether this process hashed torch's sources for it.
_KEY_SCRIPT = """
import os, torch
from torch._inductor import codecache
hashed = []
original = codecache.build_code_hash
codecache.build_code_hash = lambda *a: (hashed.append(1), original(*a))[1]
from openneuron._torch_patches import torch_source_key
torch_source_key.prime(os.environ['MEMO_DIR'])
print(codecache.torch_key().hex(), bool(hashed))
"""


def _key_process(cache_dir):
    key, hashed = run_python(_KEY_SCRIPT, env={"MEMO_DIR": str(cache_dir)}, timeout=300).stdout.split()
    return key, hashed == "True"


def test_new_process_reads_torch_key_from_the_memo(tmp_path):
    key, hashed = _key_process(tmp_path)
    assert hashed  # cold: PyTorch computes it
    (memo,) = (tmp_path / "torch-source-keys").iterdir()
    assert memo.read_text().strip() == key
    assert _key_process(tmp_path) == (key, False)  # warm: the same value, no hashing
    memo.write_text("not a digest")  # a damaged memo is ignored and rewritten
    assert _key_process(tmp_path) == (key, True)
    assert memo.read_text().strip() == key


def test_compiled_graph_hits_the_cache_with_a_remembered_torch_key(tmp_path):
    code = (
        "import torch, openneuron.compiler as c\n"
        "x = torch.randn(4, 8, device='neuron')\n"
        "y = torch.compile(lambda x: (x - 1).relu(), backend='neuron')(x)\n"
        "assert torch.equal(y.cpu(), (x.cpu() - 1).relu())\n"
        "print(c.metrics()['graphs_loaded'])\n"
    )
    env = {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch")}
    loaded = [run_python(code, env=env, timeout=300).stdout.strip() for _ in range(2)]
    assert loaded == ["0", "1"], loaded
    assert len(os.listdir(tmp_path / "kernels" / "torch-source-keys")) == 1
