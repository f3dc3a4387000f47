"""The CPU-fallback path (op run on the CPU with copies), forced with
OPENNEURON_FORCE_CPU_FALLBACK as drivers without host-addressable memory
would take it: same results as the CPU, every copy counted, a report of what
fell back, and the warn/error/silent policy."""
import os
import warnings

import pytest
import torch

from conftest import run_python

pytestmark = pytest.mark.timeout(120)

N = torch.neuron


def test_forced_ops_match_cpu_warn_once_and_are_reported():
    proc = run_python(
        """
        import warnings, torch
        N = torch.neuron
        assert N.fallback_policy() == "warn"
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(100, generator=g), torch.randn(100, generator=g)
        an, bn = a.to("neuron"), b.to("neuron")
        N.reset_transfer_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = an + bn
        stats = N.transfer_stats()
        # two inputs down, one result up: 400 bytes each
        assert stats["device_to_host"]["cpu_fallback"] == {"count": 2, "bytes": 800}, stats
        assert stats["host_to_device"]["cpu_fallback"] == {"count": 1, "bytes": 400}, stats
        assert stats["device_to_host"]["copy"]["count"] == 0
        assert stats["host_to_device"]["copy"]["count"] == 0
        with warnings.catch_warnings(record=True) as caught2:
            warnings.simplefilter("always")
            s2 = an + bn                    # add again: no second warning
            p = an * bn                     # mul: its own warning
            p2 = torch.mul(an, 3.0)         # mul.Tensor again (scalar wrapped): no warning
            o = torch.empty(0, device="neuron")
            torch.add(an, bn, out=o)        # add.out: another overload, forced by 'add'
            d = an - bn                     # not forced: no fallback
        messages = [str(w.message) for w in caught + caught2 if "CPU fallback" in str(w.message)]
        print("\\n".join(m.split(" ")[0] for m in messages))
        assert all("fallback_report" in m for m in messages)
        for got, want in [(s, a + b), (s2, a + b), (p, a * b), (p2, a * 3.0), (o, a + b), (d, a - b)]:
            assert got.device.type == "neuron"
            assert torch.equal(got.cpu(), want)
        report = {r["op"]: r for r in N.fallback_report()}
        assert set(report) >= {"aten::add.Tensor", "aten::mul.Tensor", "aten::add.out"}, report
        assert "aten::sub.Tensor" not in report
        assert report["aten::add.Tensor"]["calls"] == 2
        assert report["aten::add.out"]["calls"] == 1
        assert report["aten::mul.Tensor"]["calls"] == 2
        assert all(r["seconds"] > 0 for r in report.values())
        text = N.format_fallback_report()
        assert "aten::add.Tensor" in text and "calls" in text and "seconds" in text
        N.reset_fallback_report()
        assert N.fallback_report() == []
        assert N.format_fallback_report() == "No op fell back to the CPU."
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "add,mul"},
    )
    assert proc.stdout.split() == ["aten::add.Tensor", "aten::mul.Tensor", "aten::add.out"]


def test_fully_qualified_op_names_and_autograd():
    proc = run_python(
        """
        import torch
        N = torch.neuron
        x = torch.randn(4, 5, dtype=torch.float64)
        w = torch.randn(5, 3, dtype=torch.float64)
        xn = x.to("neuron").requires_grad_()
        wn = w.to("neuron").requires_grad_()
        out = torch.mm(xn, wn).tanh().sum()
        out.backward()
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        torch.mm(xc, wc).tanh().sum().backward()
        assert xn.grad.dtype == torch.float64
        torch.testing.assert_close(xn.grad.cpu(), xc.grad)
        torch.testing.assert_close(wn.grad.cpu(), wc.grad)
        print(sorted(r["op"] for r in N.fallback_report()))
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "aten::mm,aten::tanh",
             "OPENNEURON_CPU_FALLBACK": "silent"},
    )
    ops = eval(proc.stdout.strip())  # noqa: S307 - our own output
    assert "aten::mm" in ops and "aten::tanh" in ops, ops
    assert all(op in ("aten::mm", "aten::tanh") for op in ops), ops
    assert "CPU fallback" not in proc.stderr


def test_error_policy_raises_not_implemented():
    proc = run_python(
        """
        import torch
        N = torch.neuron
        assert N.fallback_policy() == "error"
        a = torch.ones(3, device="neuron")
        try:
            a + a
        except NotImplementedError as e:
            print(e)
        else:
            raise AssertionError("no error")
        assert N.fallback_report() == []
        assert (a - a).sum().item() == 0.0   # other ops still run
        N.set_fallback_policy("silent")
        assert (a + a).sum().item() == 6.0
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "add", "OPENNEURON_CPU_FALLBACK": "error"},
    )
    message = proc.stdout.strip()
    assert message.startswith("aten::add.Tensor"), message
    assert "OPENNEURON_CPU_FALLBACK=error" in message


def test_silent_policy_emits_no_warning():
    proc = run_python(
        """
        import warnings, torch
        warnings.simplefilter("error")
        a = torch.arange(4.0, device="neuron")
        assert torch.equal((a * a).cpu(), torch.arange(4.0) ** 2)
        assert torch.neuron.fallback_policy() == "silent"
        assert torch.neuron.fallback_report()[0]["op"] == "aten::mul.Tensor"
        print("ok")
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "mul", "OPENNEURON_CPU_FALLBACK": "silent"},
    )
    assert proc.stdout.strip() == "ok"
    assert "Warning" not in proc.stderr


def test_invalid_policy_is_a_readable_error():
    proc = run_python(
        """
        import torch
        try:
            torch.ones(2, device="neuron") + 1
        except ValueError as e:
            print(e)
        """,
        env={"OPENNEURON_CPU_FALLBACK": "sometimes"},
    )
    assert "OPENNEURON_CPU_FALLBACK='sometimes'" in proc.stdout
    assert "warn, error or silent" in proc.stdout


def test_set_fallback_policy_validates():
    previous = N.fallback_policy()
    try:
        for policy in ("silent", "error", "warn"):
            N.set_fallback_policy(policy)
            assert N.fallback_policy() == policy
        with pytest.raises(ValueError, match="warn, error or silent"):
            N.set_fallback_policy("bogus")
    finally:
        N.set_fallback_policy(previous)


def test_reload_settings_in_process(transfers):
    # openneuron._C._reload_settings() re-reads the environment: forcing an op
    # onto the fallback in-process, then back to the host kernel.
    import openneuron

    a = torch.arange(8.0, device="neuron")
    saved = {k: os.environ.get(k) for k in ("OPENNEURON_FORCE_CPU_FALLBACK", "OPENNEURON_CPU_FALLBACK")}
    N.reset_fallback_report()
    try:
        os.environ["OPENNEURON_FORCE_CPU_FALLBACK"] = "neg"
        os.environ["OPENNEURON_CPU_FALLBACK"] = "silent"
        openneuron._C._reload_settings()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = torch.neg(a)
        assert torch.equal(r.cpu(), -torch.arange(8.0))
        assert [x["op"] for x in N.fallback_report()] == ["aten::neg"]
        stats = transfers()
        assert stats["device_to_host"]["cpu_fallback"]["bytes"] == 32
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        openneuron._C._reload_settings()
        N.reset_fallback_report()
    N.reset_transfer_stats()
    torch.neg(a)
    assert N.total_transfers() == (0, 0)
    assert N.fallback_report() == []
    assert N.fallback_policy() == "warn"


def test_force_all_training_step_matches_cpu():
    proc = run_python(
        """
        import copy, torch
        import torch.nn.functional as F
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))
        ref = copy.deepcopy(model)
        model.to("neuron")
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
        xn, yn = x.to("neuron"), y.to("neuron")
        for _ in range(2):
            F.cross_entropy(model(xn), yn).backward(); opt.step(); opt.zero_grad()
            F.cross_entropy(ref(x), y).backward(); ref_opt.step(); ref_opt.zero_grad()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.detach().cpu(), q.detach())
        assert torch.equal(torch.arange(6.0, device="neuron").cpu(), torch.arange(6.0))
        assert torch.ones(3, device="neuron").sum().item() == 3.0
        assert len(torch.neuron.fallback_report()) > 5
        print("ok")
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "all", "OPENNEURON_CPU_FALLBACK": "silent"},
        check=False,
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "ok"


def test_force_all_keeps_views_written_arguments_and_layouts():
    # Views stay views (metadata only, never copied); arguments an op writes
    # come back (batch norm's running stats); results keep the CPU's layout;
    # conjugate views travel as bits.
    proc = run_python(
        """
        import torch
        x = torch.zeros(3, 3, device="neuron")
        x.diagonal().add_(1)
        assert x.cpu().trace().item() == 3.0
        a = torch.randn(5, device="neuron"); before = a.cpu(); a.detach().add_(1)
        torch.testing.assert_close(a.cpu(), before + 1)
        pad = torch.nn.functional.pad(torch.arange(4.).reshape(1, 1, 4).to("neuron"), (1, 1), mode="circular")
        assert pad.cpu().tolist() == [[[3.0, 0.0, 1.0, 2.0, 3.0, 0.0]]]
        bn = torch.nn.BatchNorm1d(3).to("neuron"); ref = torch.nn.BatchNorm1d(3)
        inp = torch.randn(4, 3)
        bn(inp.to("neuron")); ref(inp)
        torch.testing.assert_close(bn.running_mean.cpu(), ref.running_mean)
        A, B = torch.randn(5, 3), torch.randn(5, 2)
        sol = torch.linalg.lstsq(A.to("neuron"), B.to("neuron")).solution
        assert sol.stride() == torch.linalg.lstsq(A, B).solution.stride()
        m, n = torch.randn(5, 5), torch.randn(10, 20)
        out = torch.empty(50, 100, device="neuron")
        torch.kron(m.to("neuron"), n.to("neuron"), out=out)
        torch.testing.assert_close(out.cpu(), torch.kron(m, n))
        q, qs = torch.randn(3, 5), torch.tensor([0.2, 0.7])
        r = torch.quantile(q.to("neuron"), qs.to("neuron"), dim=0)
        assert r.stride() == torch.quantile(q, qs, dim=0).stride()
        c = torch.randn(4, dtype=torch.complex64)
        torch.testing.assert_close((c.to("neuron").conj() * 2).cpu(), c.conj() * 2)
        print("ok")
        """,
        env={"OPENNEURON_FORCE_CPU_FALLBACK": "all", "OPENNEURON_CPU_FALLBACK": "silent"},
        check=False,
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "ok"
