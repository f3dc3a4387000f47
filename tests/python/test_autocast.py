"""Mixed precision: torch.autocast("neuron") with CUDA's op policy, and
torch.amp.GradScaler("neuron")."""
import copy

import pytest
import torch
import torch.nn.functional as F

DEV = torch.device("neuron", 0)
LOW = [torch.bfloat16, torch.float16]



def inputs():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 8, generator=g)
    w = torch.randn(3, 8, generator=g)
    return a.to(DEV), w.to(DEV), a, w


def test_autocast_is_available():
    assert torch.amp.is_autocast_available("neuron")
    with torch.autocast("neuron"):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == torch.float16  # CUDA's default
    assert not torch.is_autocast_enabled("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_matmul_like_ops_run_in_lower_precision(dtype):
    a, w, ac, wc = inputs()
    wt = w.t().contiguous()
    bias = torch.zeros(4, 3, device=DEV)
    a3, wt3, q = a.unsqueeze(0), wt.unsqueeze(0), a.view(1, 1, 4, 8)
    # (views and the like are made outside the region: see
    # test_model_forward_under_autocast)
    with torch.autocast("neuron", dtype=dtype):
        results = {
            "mm": torch.mm(a, wt),
            "matmul": torch.matmul(a, wt),
            "linear": F.linear(a, w),
            "addmm": torch.addmm(bias, a, wt),
            "bmm": torch.bmm(a3, wt3),
            "sdpa": F.scaled_dot_product_attention(q, q, q),
        }
    for name, result in results.items():
        assert result.dtype == dtype, name
        assert result.device == DEV, name
    # values: the op on lower-precision inputs, as on the CPU
    expected = F.linear(ac.to(dtype), wc.to(dtype))
    torch.testing.assert_close(results["linear"].cpu(), expected)
    # outside the region, float32 again
    assert torch.mm(a, wt).dtype == torch.float32


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_sensitive_ops_run_in_float32(dtype):
    a, _, ac, _ = inputs()
    low = a.to(dtype)
    with torch.autocast("neuron", dtype=dtype):
        softmax = F.softmax(low, 1)
        log_softmax = F.log_softmax(low, 1)
        layer_norm = F.layer_norm(low, (8,))
        total = torch.sum(low)
    for name, t in [("softmax", softmax), ("log_softmax", log_softmax), ("layer_norm", layer_norm), ("sum", total)]:
        assert t.dtype == torch.float32, name
    torch.testing.assert_close(layer_norm.cpu(), F.layer_norm(ac.to(dtype).float(), (8,)))
    # float64 inputs are left alone
    d, dt = a.double(), a.double().t().contiguous()
    with torch.autocast("neuron", dtype=dtype):
        assert torch.mm(d, dt).dtype == torch.float64


def test_autocast_neuron_does_not_affect_cpu_tensors():
    _, _, ac, wc = inputs()
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert F.linear(ac, wc).dtype == torch.float32


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_model_forward_under_autocast(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(DEV)
    x = torch.randn(5, 8, device=DEV)
    target = torch.randn(5, 4, device=DEV)
    with torch.autocast("neuron", dtype=dtype):
        h = model[0](x)
        assert h.dtype == dtype
        out = model(x) + 1.0
        assert out.dtype == dtype
        loss = F.mse_loss(out.float(), target)
        probs = F.softmax(out, -1)
        ce = F.cross_entropy(out, torch.zeros(5, dtype=torch.long, device=DEV))
    assert loss.dtype == probs.dtype == ce.dtype == torch.float32
    loss.backward()
    assert model[0].weight.grad.dtype == torch.float32


def _train(device, scaler=None, steps=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 6, generator=g).to(device)
    y = torch.randn(16, 2, generator=g).to(device)
    for _ in range(steps):
        loss = F.mse_loss(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        opt.zero_grad()
    return model


def test_grad_scaler_step_matches_unscaled_step():
    scaler = torch.amp.GradScaler("neuron", init_scale=2.0**10)
    assert scaler.is_enabled()
    scaled = _train(DEV, scaler)
    plain = _train("cpu")
    assert scaler.get_scale() == 2.0**10  # no inf/nan: unchanged (growth_interval 2000)
    for p, q in zip(scaled.parameters(), plain.parameters()):
        assert p.device == DEV
        torch.testing.assert_close(p.detach().cpu(), q.detach())


def test_grad_scaler_skips_step_on_inf():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=1024.0)
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(3, 4, device=DEV)
    loss = model(x).sum() * float("inf")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    for key, value in model.state_dict().items():
        assert torch.equal(value.cpu(), before[key].cpu()), key
    # scale(): the scaled loss is on the device, times the scale
    loss2 = model(x).sum()
    assert torch.allclose(scaler.scale(loss2).cpu(), loss2.detach().cpu() * 512.0)
    scaler.unscale_(opt)


def test_autocast_with_grad_scaler_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("neuron")
    x = torch.randn(16, 6, device=DEV)
    y = torch.randn(16, 2, device=DEV)
    losses = []
    for _ in range(5):
        with torch.autocast("neuron", dtype=torch.float16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())
