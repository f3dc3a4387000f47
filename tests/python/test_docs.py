"""The documentation does not rot: the site builds with warnings as errors,
the README's and the quick start's Python examples run, the environment-
variable table matches the variables the code reads, and the paths, links
and API names the pages mention exist.

Code blocks: every ```python block of README.md and docs/quickstart.md runs
in a fresh interpreter (this repository's Python, the host driver, empty
compile caches). An HTML comment on the line above a block changes that:

    <!-- run-with: torchrun --nproc-per-node 2 -->   the block is a script run by torchrun
    <!-- not-run: reason -->                         not run; reported as a skip with the reason

Keep not-run blocks to a minimum: a block that cannot run is a block that
can silently go wrong."""
import glob
import os
import re
import shlex
import subprocess
import sys

import pytest
import torch

from conftest import _OPENNEURON_ENV

pytestmark = pytest.mark.timeout(300)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
README = os.path.join(ROOT, "README.md")
RUN_BLOCKS_OF = (README, os.path.join(DOCS, "quickstart.md"))
MAX_NOT_RUN = 2


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _pages():
    return [README] + sorted(glob.glob(os.path.join(DOCS, "*.md")))


# ----------------------------------------------------------------- the site


def test_docs_build_without_warnings():
    """scripts/docs.sh: sphinx-build -E -W --keep-going -n (broken links,
    missing references and docstrings Sphinx cannot parse fail)."""
    proc = subprocess.run([os.path.join(ROOT, "scripts", "docs.sh")], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    for page in ("index", "quickstart", "migration", "environment", "api"):
        assert os.path.exists(os.path.join(ROOT, "build", "docs", f"{page}.html")), page


def test_docs_dependencies_are_pinned_alike_in_setup_and_docs_script():
    pins = lambda text: sorted(re.findall(r'"((?:sphinx|myst-parser|furo)==[^"]+)"', text))  # noqa: E731
    docs_pins = pins(_read(os.path.join(ROOT, "scripts", "docs.sh")))
    assert len(docs_pins) == 3, docs_pins
    assert pins(_read(os.path.join(ROOT, "scripts", "setup.sh"))) == docs_pins


# ------------------------------------------------------------- code blocks


def _code_blocks():
    """(id, kind, argument, code) for every ```python block of the pages that run."""
    blocks = []
    for path in RUN_BLOCKS_OF:
        lines = _read(path).splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                j = i + 1
                while lines[j].strip() != "```":
                    j += 1
                code = "\n".join(lines[start + 1:j]) + "\n"
                above = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
                kind, arg = "run", ""
                m = re.fullmatch(r"<!--\s*(not-run|run-with):\s*(.*?)\s*-->", above)
                if m:
                    kind, arg = m.group(1), m.group(2)
                blocks.append((f"{os.path.relpath(path, ROOT)}:{start + 1}", kind, arg, code))
                i = j
            i += 1
    return blocks


BLOCKS = _code_blocks()


def test_the_pages_have_examples_and_few_exceptions():
    files = {b[0].split(":")[0] for b in BLOCKS}
    assert files == {os.path.relpath(p, ROOT) for p in RUN_BLOCKS_OF}, files
    not_run = [(b[0], b[2]) for b in BLOCKS if b[1] == "not-run"]
    assert all(reason for _, reason in not_run), f"a not-run block needs its reason: {not_run}"
    assert len(not_run) <= MAX_NOT_RUN, f"too many blocks that do not run: {not_run}"


def _clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in _OPENNEURON_ENV}
    env["OPENNEURON_DRIVER"] = "host"
    env["PYTHONPATH"] = ""
    # A fresh machine's caches, as the conftest gives the suite.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-cache")
    env["OPENNEURON_COMPILE_CACHE_DIR"] = str(tmp_path / "kernel-cache")
    return env


@pytest.mark.parametrize("block", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_code_block_runs(block, tmp_path):
    name, kind, arg, code = block
    if kind == "not-run":
        pytest.skip(f"{name} marked not-run: {arg}")
    script = tmp_path / "example.py"
    script.write_text(code)
    if kind == "run-with":
        words = shlex.split(arg)
        assert words and words[0] == "torchrun", f"{name}: run-with supports torchrun only, got {arg!r}"
        argv = [sys.executable, "-m", "torch.distributed.run", *words[1:], str(script)]
    else:
        argv = [sys.executable, str(script)]
    proc = subprocess.run(argv, cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, (f"{name} failed ({' '.join(argv)})\n--- stdout ---\n{proc.stdout[-5000:]}"
                                  f"\n--- stderr ---\n{proc.stderr[-5000:]}")


# ---------------------------------------------------------- the README


def test_readme_keeps_the_two_commands_and_the_generated_section():
    text = _read(README)
    assert "    scripts/setup.sh && .venv/bin/python demo/train_gpt.py --compare\n" in text
    assert "    scripts/test.sh\n" in text
    # benchmarks/report.py rewrites what lies between these markers.
    assert text.count("<!-- benchmarks:begin -->") == 1 and text.count("<!-- benchmarks:end -->") == 1
    assert text.index("<!-- benchmarks:begin -->") < text.index("<!-- benchmarks:end -->")
    assert "](docs/migration.md)" in text, "the migration guide is one click from the README"


# ------------------------------------------------- environment variables

# Where OpenNeuron, its tests and its tools read the environment. Reads go
# through small helpers (hal/config.cc get_env, runtime/settings.cc env and
# flag, compiler/config.py _flag), so a variable counts as read when its
# name is a whole string literal in a file that reads the environment.
_SOURCE_GLOBS = (
    "python/openneuron/**/*.py", "csrc/**/*.cc", "csrc/**/*.h", "csrc/**/*.cpp",
    "tests/python/**/*.py", "conformance/**/*.py", "benchmarks/**/*.py", "demo/**/*.py", "tools/**/*.py",
)
_READS_ENV = re.compile(r"getenv|os\.environ|environ\.get|secure_getenv")
_LITERAL = re.compile(r"""["']([A-Z][A-Z0-9_]*[A-Z0-9])["']""")


def _variables_read():
    found = {}
    for pattern in _SOURCE_GLOBS:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            if os.path.abspath(path) == os.path.abspath(__file__):
                continue
            text = _read(path)
            if not _READS_ENV.search(text):
                continue
            for name in _LITERAL.findall(text):
                found.setdefault(name, os.path.relpath(path, ROOT))
    return found


def _table_variables():
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", _read(os.path.join(DOCS, "environment.md")), re.M)
    assert len(rows) == len(set(rows)), "a variable has two rows"
    return rows


def test_every_openneuron_variable_the_code_reads_is_in_the_table():
    read = {k: v for k, v in _variables_read().items() if k.startswith("OPENNEURON_")}
    # The library's own reads (python/openneuron, csrc) are the heart of it.
    assert {"OPENNEURON_DRIVER", "OPENNEURON_CPU_FALLBACK", "OPENNEURON_COMPILE_CACHE_DIR"} <= read.keys()
    missing = sorted(f"{k} (read in {v})" for k, v in read.items() if k not in _table_variables())
    assert not missing, "add these to docs/environment.md: " + ", ".join(missing)


def test_every_row_of_the_table_is_read_somewhere():
    read = _variables_read()
    torch_dir = os.path.dirname(torch.__file__)
    unread = []
    for name in _table_variables():
        if name in read:
            continue
        # PyTorch's own variables (autoload, Inductor's cache, Gloo's interface).
        if not name.startswith("OPENNEURON_") and subprocess.run(
                ["grep", "-rqsF", "--include=*.py", name, torch_dir]).returncode == 0:
            continue
        unread.append(name)
    assert not unread, f"docs/environment.md documents variables nothing reads: {unread}"


# ------------------------------------------ paths, links and API names


_TOP_DIRS = ("csrc/", "python/", "tests/", "benchmarks/", "conformance/", "scripts/", "demo/", "tools/", "docs/")


def test_repository_paths_the_pages_name_exist():
    missing = []
    for page in _pages():
        for token in re.findall(r"`([^`\s]+)`", _read(page)):
            path = token.rstrip(",.:;)")
            if not path.startswith(_TOP_DIRS) or "<" in path:
                continue
            if not glob.glob(os.path.join(ROOT, path.rstrip("/"))):
                missing.append(f"{os.path.relpath(page, ROOT)}: {path}")
    # test names the pages abbreviate after a first full path (`test_rng.py`)
    for page in _pages():
        for name in set(re.findall(r"`(test_[a-z0-9_]+\.py)`", _read(page))):
            if not os.path.exists(os.path.join(ROOT, "tests", "python", name)):
                missing.append(f"{os.path.relpath(page, ROOT)}: {name}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def _slug(heading):
    """GitHub's and MyST's anchor for a heading."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_readme_links_resolve():
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _read(README)):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.join(ROOT, path)
        if not os.path.exists(full):
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", _read(full), re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    assert not broken, f"README links that lead nowhere: {broken}"


def test_api_reference_covers_every_public_name_of_torch_neuron():
    api = _read(os.path.join(DOCS, "api.md"))
    documented = set(re.findall(r"\.\. auto(?:function|class|data):: ([\w.]+)", api))
    mentioned = set(re.findall(r"`(?:torch\.neuron\.)?(\w+)`", api))
    public = {n for n in dir(torch.neuron)
              if not n.startswith("_") and not isinstance(getattr(torch.neuron, n), type(os))}
    missing = sorted(n for n in public if n not in documented and n not in mentioned)
    assert not missing, f"docs/api.md does not document: {missing}"
