"""Loading: `import torch` alone loads OpenNeuron through the torch.backends
entry point; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off; a broken load
becomes a warning and never breaks `import torch`."""
import warnings

import pytest
import torch

from conftest import run_python

pytestmark = pytest.mark.timeout(120)


def test_import_torch_alone_enables_neuron():
    proc = run_python(
        """
        import sys
        import torch
        assert "openneuron" in sys.modules, "autoload did not import openneuron"
        import openneuron
        assert openneuron.is_loaded()
        assert torch._C._get_privateuse1_backend_name() == "neuron"
        x = torch.arange(6, device="neuron").reshape(2, 3)
        y = (x * 2).sum().item()
        assert y == 30, y
        print(x.device, torch.neuron.device_count(), torch.tensor([1.0]).neuron().device)
        """
    )
    assert proc.stdout.split() == ["neuron:0", "4", "neuron:0"]
    assert "Warning" not in proc.stderr, proc.stderr


def test_autoload_disabled_until_import_openneuron():
    proc = run_python(
        """
        import sys
        import torch
        assert not hasattr(torch, "neuron"), "autoload ran although disabled"
        assert "openneuron" not in sys.modules
        try:
            torch.empty(1, device="neuron")
        except RuntimeError:
            pass
        else:
            raise AssertionError("device 'neuron' existed before import openneuron")
        import openneuron
        assert hasattr(torch, "neuron") and openneuron.is_loaded()
        print(torch.ones(3, device="neuron").sum().item())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.stdout.strip() == "3.0"


def test_import_openneuron_before_torch():
    # `import openneuron` imports torch, whose autoload must not recurse into
    # the half-initialised package; the package finishes the load itself.
    proc = run_python(
        """
        import openneuron
        import torch
        assert openneuron.is_loaded()
        openneuron._load()  # idempotent
        print((torch.ones(2, device="neuron") + 1).tolist())
        """
    )
    assert proc.stdout.strip() == "[2.0, 2.0]"
    assert "could not be loaded" not in proc.stderr


def test_load_is_idempotent():
    import openneuron

    assert openneuron.is_loaded()
    module = torch.neuron
    openneuron._load()
    assert torch.neuron is module
    assert torch.ones(1, device="neuron").device.type == "neuron"


def test_broken_extension_warns_and_torch_still_imports():
    # The compiled extension fails to load (as with a missing shared library):
    # import torch must still work, with a RuntimeWarning naming the cause.
    proc = run_python(
        """
        import sys, warnings, importlib.abc

        class Broken(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "openneuron._C":
                    raise ImportError("simulated: libopenneuron.so: cannot open shared object file")
                return None

        sys.meta_path.insert(0, Broken())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        messages = [(w.category.__name__, str(w.message)) for w in caught
                    if "OpenNeuron" in str(w.message)]
        assert len(messages) == 1, messages
        category, message = messages[0]
        assert category == "RuntimeWarning", category
        assert "simulated: libopenneuron.so" in message, message
        assert "neuron" in message
        assert not hasattr(torch, "neuron")
        assert (torch.ones(2) + 1).tolist() == [2.0, 2.0]
        print("ok")
        """
    )
    assert proc.stdout.strip() == "ok"


def test_version_mismatch_on_autoload_is_a_readable_warning():
    proc = run_python(
        """
        import sys, types, warnings
        fake = types.ModuleType("openneuron._build_info")
        fake.TORCH_VERSION = "9.9.9"
        sys.modules["openneuron._build_info"] = fake
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert any("9.9.9" in m and torch.__version__.split("+")[0] in m for m in messages), messages
        assert not hasattr(torch, "neuron")
        assert torch.zeros(1).item() == 0.0
        print("ok")
        """
    )
    assert proc.stdout.strip() == "ok"


def test_check_torch_version_names_both_versions(monkeypatch):
    import openneuron

    running = torch.__version__.split("+")[0]
    monkeypatch.setattr(openneuron._build_info, "TORCH_VERSION", "9.9.9")
    with pytest.raises(ImportError) as info:
        openneuron._check_torch_version()
    message = str(info.value)
    assert "9.9.9" in message and running in message
    # A local-version suffix ("+cpu") on either side is not a mismatch.
    monkeypatch.setattr(openneuron._build_info, "TORCH_VERSION", running + "+cpu")
    openneuron._check_torch_version()


def test_autoload_turns_load_errors_into_warnings(monkeypatch):
    import _openneuron_autoload
    import openneuron

    def broken_load():
        raise RuntimeError("simulated load failure")

    monkeypatch.setattr(openneuron, "_load", broken_load)
    monkeypatch.setattr(openneuron, "_loaded", False)
    with pytest.warns(RuntimeWarning, match="simulated load failure"):
        _openneuron_autoload.autoload()
    # The already-loaded device keeps working.
    assert torch.ones(1, device="neuron").item() == 1.0


def test_autoload_skips_while_package_initializes(monkeypatch):
    import _openneuron_autoload
    import openneuron

    calls = []
    monkeypatch.setattr(openneuron, "_initializing", True)
    monkeypatch.setattr(openneuron, "_load", lambda: calls.append(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _openneuron_autoload.autoload()
    assert calls == []
