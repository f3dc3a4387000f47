"""The `torch.backends` entry point of OpenNeuron.

It lives outside the `openneuron` package so that a failure while loading
OpenNeuron becomes a warning here instead of an exception that would break
`import torch` (PyTorch turns entry-point errors into import errors).
"""
import sys
import warnings


def autoload():
    package = sys.modules.get("openneuron")
    if package is not None and getattr(package, "_initializing", False):
        return  # `import openneuron` imported torch; it finishes the load itself
    try:
        import openneuron

        openneuron._load()
    except Exception as error:  # noqa: BLE001 - any failure must stay a warning
        warnings.warn(
            f"OpenNeuron could not be loaded, so the 'neuron' device is "
            f"unavailable: {error}",
            RuntimeWarning,
            stacklevel=2,
        )
