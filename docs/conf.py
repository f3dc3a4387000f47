"""Sphinx configuration of the OpenNeuron documentation (scripts/docs.sh builds it)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
# The API reference imports torch.neuron; the host driver needs no hardware.
os.environ.setdefault("OPENNEURON_DRIVER", "host")

project = "OpenNeuron"
author = "OpenNeuron contributors"
copyright = "OpenNeuron contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "OpenNeuron"
html_static_path = []

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": True}

# Nitpicky mode (-n) checks every cross-reference. PyTorch's own classes in
# signatures (torch.dtype, torch.Tensor, torch.Stream, ...) have no targets
# here: the build is offline, so there is no intersphinx inventory to point
# them at.
nitpick_ignore_regex = [
    ("py:class", r"torch\..*"),
    ("py:class", r"_NeuronEventType"),
]


def _torch_neuron_alias(app, env, node, contnode):
    """Type hints name the implementing module (openneuron.neuron.streams.Stream);
    the reference documents the public name (torch.neuron.Stream)."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("openneuron.neuron."):
        return None
    public = "torch.neuron." + target.rsplit(".", 1)[-1]
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)


def setup(app):
    app.connect("missing-reference", _torch_neuron_alias)
