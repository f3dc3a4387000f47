"""Eager ops on neuron tensors: the host driver runs ATen's CPU kernels on
device memory, so results, dtypes, aliasing and in-place/out= semantics must
be exactly those of the CPU, and no data may move between host and device.
Two matmul routes of its own match the CPU within float32 rounding instead:
float32 mm/addmm with few rows (test_small_row_matmuls_*) and large float32
products through oneDNN (test_large_matmuls_*)."""
import copy
import platform

import pytest
import torch
import torch.nn.functional as F

from conftest import run_python

pytestmark = pytest.mark.timeout(120)

N = torch.neuron
DEV = torch.device("neuron", 0)

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.complex64, torch.complex128, torch.bool,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
]


def sample(dtype, shape=(4, 6), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)
    return torch.randint(1, 50, shape, generator=g, dtype=dtype)


def is_float(t):
    return t.dtype.is_floating_point


def is_int(t):
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def is_real(t):
    return not t.dtype.is_complex


def idx(values, like):
    return torch.tensor(values, device=like.device)


# name -> (applies(a), op(a, b)); each op is run on CPU and on neuron tensors.
OPS = {
    "add": (lambda a: a.dtype != torch.bool, lambda a, b: a + b),
    "add_scalar": (lambda a: a.dtype != torch.bool, lambda a, b: a + 3),
    "mul": (lambda a: True, lambda a, b: a * b),
    "sub": (lambda a: a.dtype != torch.bool, lambda a, b: a - b),
    "div": (lambda a: True, lambda a, b: a / b),
    "floor_divide": (is_int, lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "remainder": (is_int, lambda a, b: a % b),
    "neg": (lambda a: a.dtype != torch.bool, lambda a, b: -a),
    "logical_not": (lambda a: True, lambda a, b: ~a if a.dtype == torch.bool else torch.logical_not(a)),
    "abs": (lambda a: a.dtype != torch.bool, lambda a, b: a.abs()),
    "pow": (lambda a: a.dtype != torch.bool, lambda a, b: a ** 2),
    "exp": (lambda a: not is_int(a) and a.dtype != torch.bool, lambda a, b: a.exp()),
    "sqrt_abs": (is_float, lambda a, b: a.abs().sqrt()),
    "sin": (is_float, lambda a, b: a.sin()),
    "tanh": (is_float, lambda a, b: torch.tanh(a)),
    "sigmoid": (is_float, lambda a, b: torch.sigmoid(a)),
    "clamp": (lambda a: is_real(a) and a.dtype != torch.bool, lambda a, b: a.clamp(min=2)),
    "sum": (lambda a: True, lambda a, b: a.sum()),
    "sum_dim": (lambda a: True, lambda a, b: a.sum(1, keepdim=True)),
    "mean": (lambda a: is_float(a) or a.dtype.is_complex, lambda a, b: a.mean(0)),
    "prod": (lambda a: True, lambda a, b: a.prod(0)),
    "cumsum": (lambda a: True, lambda a, b: a.cumsum(1)),
    "max": (is_real, lambda a, b: a.max()),
    "amin_dim": (lambda a: is_real(a) and a.dtype != torch.bool, lambda a, b: a.amin(1)),
    "argmax": (lambda a: is_real(a) and a.dtype != torch.bool, lambda a, b: a.argmax(1)),
    "sort": (is_real, lambda a, b: a.sort(dim=1, stable=True)),
    "topk": (lambda a: is_real(a) and a.dtype != torch.bool, lambda a, b: a.topk(2)),
    "std": (is_float, lambda a, b: a.std(1)),
    "eq": (lambda a: True, lambda a, b: a == b),
    "lt": (is_real, lambda a, b: a < b),
    "isclose": (lambda a: a.dtype != torch.bool, lambda a, b: torch.isclose(a, b)),
    "where": (lambda a: True, lambda a, b: torch.where(idx([True, False] * 3, a), a, b)),
    "cat": (lambda a: True, lambda a, b: torch.cat([a, b])),
    "stack": (lambda a: True, lambda a, b: torch.stack([a, b], 2)),
    "flip": (lambda a: True, lambda a, b: a.flip(0)),
    "roll": (lambda a: True, lambda a, b: a.roll(2, 1)),
    "tril": (lambda a: True, lambda a, b: a.tril()),
    "repeat": (lambda a: True, lambda a, b: a.repeat(2, 1)),
    "t_contiguous": (lambda a: True, lambda a, b: a.t().contiguous()),
    "index_select": (lambda a: True, lambda a, b: a.index_select(1, idx([0, 3, 3, 1], a))),
    "gather": (lambda a: True, lambda a, b: a.gather(1, idx([[0, 1], [2, 3], [4, 5], [5, 0]], a))),
    "advanced_index": (lambda a: True, lambda a, b: a[idx([2, 0], a), 1:4]),
    "bool_mask_index": (lambda a: True, lambda a, b: a[:, idx([True, False, True, False, False, True], a)]),
    "masked_fill": (lambda a: True, lambda a, b: a.masked_fill(idx([True, False] * 3, a), 1)),
    "index_put": (lambda a: True, lambda a, b: a.clone().index_put_((idx([0, 2], a),), b[:2])),
    "scatter": (lambda a: True, lambda a, b: a.clone().scatter_(1, idx([[0], [2], [4], [5]], a), b[:, :1])),
    "nonzero": (lambda a: True, lambda a, b: a.nonzero()),
    "unique": (is_real, lambda a, b: torch.unique(a, return_counts=True)),
    "matmul": (lambda a: a.dtype != torch.bool, lambda a, b: a @ b.T),
    "bitwise_and": (lambda a: is_int(a) or a.dtype == torch.bool, lambda a, b: a & b),
    "to_float64": (lambda a: True, lambda a, b: a.to(torch.complex128 if a.dtype.is_complex else torch.float64)),
    "to_int32": (is_real, lambda a, b: a.to(torch.int32)),
    "softmax": (is_float, lambda a, b: a.softmax(1)),
    "log_softmax": (is_float, lambda a, b: F.log_softmax(a, 0)),
    "fill_": (lambda a: True, lambda a, b: a.clone().fill_(1)),
    "zeros_like": (lambda a: True, lambda a, b: torch.zeros_like(a) + torch.ones_like(a)),
    "full_like": (lambda a: a.dtype != torch.bool, lambda a, b: torch.full_like(a, 7)),
}


def as_tuple(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ops_match_cpu(dtype):
    a, b = sample(dtype), sample(dtype, seed=1)
    an, bn = a.to(DEV), b.to(DEV)
    failures, ran = [], 0
    for name, (applies, op) in OPS.items():
        if not applies(a):
            continue
        try:
            expected = as_tuple(op(a, b))
        except (RuntimeError, NotImplementedError):
            continue  # not supported by the CPU either
        ran += 1
        try:
            got = as_tuple(op(an, bn))
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.device == DEV, f"result on {g.device}"
                assert g.dtype == e.dtype, f"dtype {g.dtype} != CPU {e.dtype}"
                assert g.shape == e.shape, f"shape {g.shape} != CPU {e.shape}"
                # The same CPU kernels run: results are bitwise identical.
                torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0, equal_nan=True)
        except Exception as error:  # noqa: BLE001 - collect every failing op
            failures.append(f"{name}: {type(error).__name__}: {str(error)[:200]}")
    assert ran >= 25
    assert not failures, "\n".join(failures)


def test_float64_is_not_narrowed():
    x = torch.tensor([1.0, 1e-12], dtype=torch.float64, device=DEV)
    assert x.dtype == torch.float64
    assert x.sum().item() == 1.000000000001
    y = torch.tensor(0.1, dtype=torch.float64, device=DEV)
    assert (y * 3).item() == 0.1 * 3
    assert (y * 3).dtype == torch.float64
    big = torch.tensor([2.0**53, 1.0], dtype=torch.float64, device=DEV)
    assert big.cumsum(0)[1].item() == 2.0**53  # as on the CPU, no excess precision
    assert torch.tensor(1e300, dtype=torch.float64, device=DEV).mul(10).item() == 1e301
    z = torch.tensor([1 + 1e-12j], dtype=torch.complex128, device=DEV)
    assert z.imag.item() == 1e-12 and z.dtype == torch.complex128
    i = torch.tensor([2**62], dtype=torch.int64, device=DEV)
    assert (i + 1).item() == 2**62 + 1
    m = torch.randn(8, 8, dtype=torch.float64)
    assert (m.to(DEV) @ m.to(DEV)).dtype == torch.float64
    torch.testing.assert_close((m.to(DEV) @ m.to(DEV)).cpu(), m @ m, rtol=0, atol=0)


SCALAR = 0.1 + 1e-12  # not representable in float32


@pytest.mark.parametrize(
    "op",
    [
        lambda x: torch.full((3,), SCALAR, dtype=torch.float64, device=x.device),
        lambda x: x.clone().fill_(SCALAR),
        lambda x: x + SCALAR,
        lambda x: (x + 1) * SCALAR,
        lambda x: x.masked_fill(x == 0, SCALAR),
        lambda x: x.clamp(min=SCALAR),
        lambda x: torch.where(x == 0, SCALAR, x),
        lambda x: x.addcmul(x + 1, x + 1, value=SCALAR),
        lambda x: x.lerp(x + 1, SCALAR),
        lambda x: torch.arange(0, 1, SCALAR, dtype=torch.float64, device=x.device),
        lambda x: torch.linspace(0, SCALAR, 5, dtype=torch.float64, device=x.device),
        lambda x: torch.tensor([1.0, 1e-8], device=x.device).sum(dtype=torch.float64),
        lambda x: torch.full((1,), complex(SCALAR, SCALAR), dtype=torch.complex128, device=x.device),
        lambda x: torch.full((1,), 2**53 + 1, dtype=torch.int64, device=x.device),
    ],
    ids=["full", "fill_", "add", "mul", "masked_fill", "clamp", "where", "addcmul", "lerp",
         "arange", "linspace", "sum_dtype", "complex_full", "int64_full"],
)
def test_python_scalars_keep_double_precision(op):
    x = torch.zeros(3, dtype=torch.float64)
    expected = op(x)
    got = op(x.to(DEV))
    assert got.dtype == expected.dtype
    assert torch.equal(got.cpu(), expected)


def test_default_dtype_float64_factories():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.ones(2, device=DEV).dtype == torch.float64
        assert torch.randn(2, device=DEV).dtype == torch.float64
        assert torch.arange(0, 1, 0.25, device=DEV).dtype == torch.float64
        assert torch.tensor([0.1], device=DEV).item() == 0.1
    finally:
        torch.set_default_dtype(previous)


def test_views_alias_like_cpu():
    def run(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        v = x.view(4, 3)
        v[0, 0] = 100
        t = x.t()
        t[1, 0] = 200
        s = x[1:, ::2]
        s.mul_(-1)
        a = x.as_strided((2, 2), (4, 1), 1)
        a.add_(1000)
        x.diagonal().sub_(0.5)
        first, _ = x.split(2)
        first[0, 3] = 7
        x.unbind(1)[2].add_(0.25)
        x.narrow(0, 2, 1).mul_(10)
        u = torch.arange(8.0, device=device).unfold(0, 4, 2)
        u[1, 0] = 55
        return [x, v, t, s, a, u, u._base]

    cpu, neuron = run("cpu"), run(DEV)
    for c, n in zip(cpu, neuron):
        assert n.device == DEV
        assert n.shape == c.shape and n.stride() == c.stride()
        assert n.storage_offset() == c.storage_offset()
        assert torch.equal(n.cpu(), c)

    x = torch.arange(6.0, device=DEV)
    v = x.view(2, 3)
    assert v._base is x and v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert x[2:].data_ptr() == x.data_ptr() + 8
    assert x.detach().data_ptr() == x.data_ptr()


def test_complex_views_alias():
    c = torch.randn(3, dtype=torch.complex64, device=DEV)
    r = torch.view_as_real(c)
    r[0, 1] = 5.0
    assert c[0].imag.item() == 5.0
    c.imag.add_(1)
    assert r[0, 1].item() == 6.0
    assert torch.equal(torch.view_as_complex(r).cpu(), c.cpu())
    assert torch.equal(c.conj().imag.cpu(), -c.imag.cpu())


def test_inplace_metadata_ops():
    def run(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        same = x
        x.unsqueeze_(0)
        shapes = [tuple(x.shape)]
        x.squeeze_(0)
        x.t_()
        shapes.append(tuple(x.stride()))
        x.transpose_(0, 1)
        x.as_strided_((3,), (2,), 1)
        shapes.append((tuple(x.shape), tuple(x.stride()), x.storage_offset()))
        x.add_(100)
        assert same is x
        return shapes, x, same

    (cs, cx, _), (ns, nx, nsame) = run("cpu"), run(DEV)
    assert cs == ns
    assert torch.equal(nx.cpu(), cx)
    assert nsame.device == DEV


def test_set_():
    def run(device):
        a = torch.arange(10.0, device=device)
        b = torch.empty(0, device=device)
        b.set_(a.untyped_storage(), 2, (2, 3), (3, 1))
        b.fill_(-1)
        c = torch.empty(0, device=device)
        c.set_(a)
        c[0] = 42
        d = torch.empty(0, device=device).set_(a.untyped_storage())
        return a, b, c, d, b.data_ptr() - a.data_ptr()

    cpu, neuron = run("cpu"), run(DEV)
    for c, n in zip(cpu[:4], neuron[:4]):
        assert n.device == DEV and n.stride() == c.stride()
        assert torch.equal(n.cpu(), c)
    assert cpu[4] == neuron[4] == 8


def test_set_to_cpu_storage_is_rejected():
    n = torch.empty(0, device=DEV)
    with pytest.raises(RuntimeError):
        n.set_(torch.arange(4.0))


def test_resize_():
    def run(device):
        a = torch.arange(6.0, device=device)
        view = a.view(2, 3)
        a.resize_(2, 2)
        shrunk = a.clone()
        a.resize_(100)
        a[50:] = 7
        a.resize_(3, 4)
        b = torch.empty(0, dtype=torch.int64, device=device)
        b.resize_(5).fill_(3)
        c = torch.ones(3, device=device)
        c.resize_as_(torch.empty(2, 2))
        return shrunk, a[:1], view, b, c.shape

    cpu, neuron = run("cpu"), run(DEV)
    for c, n in zip(cpu[:4], neuron[:4]):
        assert n.device == DEV
        assert torch.equal(n.cpu(), c)
    assert cpu[4] == neuron[4]
    # the view shares the (reallocated) storage, as on the CPU
    a = torch.arange(4.0, device=DEV)
    v = a[:2]
    a.resize_(1 << 16)
    assert v.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert torch.equal(a[:4].cpu(), torch.arange(4.0))


def test_inplace_ops():
    def run(device):
        x = torch.arange(6.0, device=device)
        x.add_(1).mul_(2).sub_(torch.ones(6, device=device)).clamp_(max=8)
        y = x.view(2, 3)
        y.t().add_(100)
        i = torch.arange(6, device=device)
        i.bitwise_left_shift_(1)
        i.div_(2, rounding_mode="floor")
        z = torch.zeros(5, device=device)
        z.index_add_(0, torch.tensor([0, 0, 4], device=device), torch.ones(3, device=device))
        w = torch.zeros(3, device=device)
        w[torch.tensor([0, 2], device=device)] += 5
        q = torch.zeros(4, device=device)
        q.masked_scatter_(torch.tensor([True, False, True, False], device=device), torch.tensor([9.0, 8.0], device=device))
        r = torch.ones(2, 3, device=device)
        r.addmm_(torch.ones(2, 4, device=device), torch.ones(4, 3, device=device), beta=0.5)
        return x, y, i, z, w, q, r

    for c, n in zip(run("cpu"), run(DEV)):
        assert torch.equal(n.cpu(), c)
    x = torch.arange(6.0, device=DEV)
    ptr = x.data_ptr()
    x.mul_(2).exp_()
    assert x.data_ptr() == ptr
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:] += x[:-1]  # overlapping in-place: refused as on the CPU
    with pytest.raises(RuntimeError):
        torch.arange(3, device=DEV).add_(0.5)  # result type can't be cast, as on CPU


def test_out_variants():
    def run(device):
        x = torch.arange(6.0, device=device)
        y = torch.ones(6, device=device)
        o = torch.empty(0, device=device)
        torch.add(x, y, out=o)  # resized from empty
        o2 = torch.empty(2, 2, device=device)
        torch.mul(x, y, out=o2)  # wrong shape: resized (with a warning)
        o3 = torch.empty(3, device=device, dtype=torch.float64)
        torch.sum(x.reshape(3, 2), 1, out=o3)
        o4 = torch.empty(0, device=device, dtype=torch.int64)
        torch.argmax(x.reshape(2, 3), 1, out=o4)
        vals = torch.empty(0, device=device)
        ind = torch.empty(0, dtype=torch.long, device=device)
        torch.sort(x.flip(0), out=(vals, ind))
        m = torch.empty(0, device=device)
        torch.mm(x.reshape(2, 3), y.reshape(3, 2), out=m)
        nc = torch.zeros(3, 2, device=device).t()
        torch.exp(x.reshape(2, 3), out=nc)  # non-contiguous out is written in place
        base = torch.zeros(10, device=device)
        torch.add(torch.ones(3, device=device), 1, out=base[2:5])
        return o, o2, o3, o4, vals, ind, m, nc, base

    with pytest.warns(UserWarning, match="resized"):
        cpu = run("cpu")
    with pytest.warns(UserWarning, match="resized"):
        neuron = run(DEV)
    for c, n in zip(cpu, neuron):
        assert n.device == DEV and n.dtype == c.dtype
        assert n.shape == c.shape and n.stride() == c.stride()
        assert torch.equal(n.cpu(), c)
    # the out tensor object is the one returned, and keeps its identity
    out = torch.empty(0, device=DEV)
    result = torch.add(torch.ones(4, device=DEV), 2, out=out)
    assert result is out and out.shape == (4,)
    # out= tensor that shares its storage with another one, resized bigger
    base = torch.zeros(4, device=DEV)
    alias = base.view(2, 2)
    with pytest.warns(UserWarning, match="resized"):
        torch.add(torch.ones(8, device=DEV), 1, out=base)
    assert torch.equal(base.cpu(), torch.full((8,), 2.0))
    assert alias.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    with pytest.raises(RuntimeError):
        torch.add(torch.ones(2, device=DEV), 1, out=torch.empty(2, dtype=torch.int64, device=DEV))


def test_autograd_matches_cpu():
    torch.manual_seed(0)
    x = torch.randn(5, 7, dtype=torch.float64)
    w = torch.randn(7, 3, dtype=torch.float64)

    def f(x, w):
        return (torch.tanh(x @ w).softmax(1) * torch.arange(3.0, dtype=x.dtype, device=x.device)).sum()

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    f(xc, wc).backward()
    xn, wn = x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()
    f(xn, wn).backward()
    assert xn.grad.device == DEV and xn.grad.dtype == torch.float64
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    torch.testing.assert_close(wn.grad.cpu(), wc.grad)
    assert torch.autograd.gradcheck(f, (xn, wn))


def test_training_step_matches_cpu_and_moves_no_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(20, 16), torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.GELU(),
        torch.nn.LayerNorm(32), torch.nn.Dropout(0.0), torch.nn.Linear(32, 4),
    )
    reference = copy.deepcopy(model)
    model.to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    tokens = torch.randint(0, 20, (8, 4))
    target = torch.randint(0, 4, (8,))
    tn, yn = tokens.to(DEV), target.to(DEV)
    N.reset_transfer_stats()
    for _ in range(3):
        loss = F.cross_entropy(model(tn), yn)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    assert N.total_transfers() == (0, 0), N.transfer_stats()
    for _ in range(3):
        ref_loss = F.cross_entropy(reference(tokens), target)
        ref_loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        ref_opt.step()
        ref_opt.zero_grad()
    torch.testing.assert_close(loss.item(), ref_loss.item())
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.device == DEV
        torch.testing.assert_close(p.detach().cpu(), q.detach())


def test_op_chain_moves_no_data(transfers):
    a = torch.randn(64, 64, device=DEV)
    indices = torch.arange(0, 64, 2, device=DEV)
    N.reset_transfer_stats()
    out = (a @ a).softmax(-1).index_select(0, indices).sum()
    out2 = F.layer_norm(a, (64,)).relu().topk(3).values.cumsum(1).max()
    big = torch.randn(1 << 20, device=DEV)
    big.sort()
    (big > 0).nonzero()
    torch.unique((big * 10).long())
    F.scaled_dot_product_attention(*(torch.randn(2, 4, 32, 16, device=DEV) for _ in range(3)), is_causal=True)
    assert transfers() == {
        d: {c: {"count": 0, "bytes": 0} for c in ("copy", "cpu_fallback", "kernel_output")}
        for d in ("host_to_device", "device_to_host", "device_to_device")
    }
    assert out.device == DEV and out2.device == DEV
    # results live in device memory: allocated by the neuron allocator
    before = N.memory_allocated()
    keep = a @ a
    assert N.memory_allocated() - before >= 64 * 64 * 4
    del keep


def test_ops_on_other_devices_stay_there():
    x = torch.randn(8, 8, device="neuron:2")
    y = (x @ x).softmax(0)
    assert y.device == torch.device("neuron", 2)
    before = N.memory_allocated(2)
    z = x.exp()
    assert N.memory_allocated(2) > before and z.device.index == 2
    torch.testing.assert_close(y.cpu(), (x.cpu() @ x.cpu()).softmax(0))
    # an op on neuron:2 tensors runs there whatever the current device is
    with N.device(1):
        w = x + 1
    assert w.device.index == 2


@pytest.mark.parametrize(
    "make,shape",
    [
        (lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
        (lambda: torch.nn.Conv2d(4, 6, 3, padding=1, groups=2), (2, 4, 8, 8)),
        (lambda: torch.nn.ConvTranspose2d(3, 2, 3, stride=2), (2, 3, 5, 5)),
        (lambda: torch.nn.Conv3d(2, 2, 2), (1, 2, 4, 4, 4)),
    ],
    ids=["conv1d", "conv2d_groups", "conv_transpose2d", "conv3d"],
)
def test_convolution(make, shape):
    # Non-CPU convolutions go through aten::convolution_overrideable in PyTorch.
    torch.manual_seed(0)
    conv = make()
    x = torch.randn(shape, requires_grad=True)
    conv(x).square().sum().backward()
    conv_n = copy.deepcopy(conv).to(DEV)
    conv_n.zero_grad()
    xn = x.detach().to(DEV).requires_grad_()
    N.reset_transfer_stats()
    out = conv_n(xn)
    out.square().sum().backward()
    assert N.total_transfers() == (0, 0)
    assert out.device == DEV
    torch.testing.assert_close(out.cpu(), conv(x))
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
    torch.testing.assert_close(conv_n.weight.grad.cpu(), conv.weight.grad)
    torch.testing.assert_close(conv_n.bias.grad.cpu(), conv.bias.grad)


def test_recurrent_layers():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 5)
    x = torch.randn(3, 2, 4)
    expected, _ = lstm(x)
    got, _ = copy.deepcopy(lstm).to(DEV)(x.to(DEV))
    torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.timeout(60)
def test_backward_matches_cpu_after_dataloader_pin_thread():
    # DataLoader(num_workers>0, pin_memory=True)'s pin thread calls
    # torch.set_num_threads(1), which autograd's device thread (started
    # later) would inherit: with backward on the calling thread (host
    # driver), neuron and CPU gradients use the same threads and match bitwise.
    proc = run_python(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        ds = TensorDataset(torch.arange(40.0).reshape(20, 2))
        for (batch,) in DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True):
            pass
        x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(0))

        def grad(device):
            b = torch.zeros(1, device=device, requires_grad=True)
            ((x.to(device) + b) ** 2).sum().backward()
            return b.grad.cpu()

        print(torch.equal((x.to("neuron") ** 2).sum().cpu(), (x ** 2).sum()),
              torch.equal(grad("neuron"), grad("cpu")))
        """
    )
    assert proc.stdout.split() == ["True", "True"]


def test_printing_and_python_conversions():
    x = torch.tensor([[1.5, -2.0], [3.0, 4.25]], device=DEV)
    assert "device='neuron:0'" in repr(x)
    assert x.tolist() == [[1.5, -2.0], [3.0, 4.25]]
    assert float(x[1, 1]) == 4.25 and int(x[0, 0]) == 1 and bool(x[0, 0])
    with pytest.raises(TypeError, match="neuron"):
        x.numpy()


@pytest.mark.timeout(60)
def test_ops_in_worker_threads():
    # The device's ops run ATen's CPU kernels with intra-op threads; results
    # made on other Python threads must also land in device memory.
    proc = run_python(
        """
        import threading, torch
        torch.set_num_threads(2)
        errors = []
        def work(seed):
            try:
                g = torch.Generator().manual_seed(seed)
                a = torch.randn(256, 256, generator=g)
                n = a.to("neuron")
                for _ in range(5):
                    r = (n @ n).relu().sum(0)
                assert r.device.type == "neuron"
                torch.testing.assert_close(r.cpu(), (a @ a).relu().sum(0))
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not errors, errors
        s = torch.neuron.transfer_stats()
        print(s["host_to_device"]["kernel_output"]["count"])
        """
    )
    assert proc.stdout.strip() == "0"


def test_attention_mask_requiring_grad_picks_a_differentiable_kernel():
    # CPU's choice: math when attn_mask requires grad (the flash kernel is not
    # differentiable w.r.t. it); elsewhere the fused flash kernel, as on CPU.
    q = torch.randn(2, 2, 3, 8)
    k = v = torch.randn(2, 2, 6, 8)
    m = torch.randn(2, 2, 3, 6, requires_grad=True)
    mn = m.detach().to(DEV).requires_grad_()
    out = F.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV), attn_mask=mn)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    torch.testing.assert_close(out.cpu(), ref)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(mn.grad.cpu(), m.grad)
    assert torch._fused_sdp_choice(q.to(DEV), k.to(DEV), v.to(DEV)) == torch._fused_sdp_choice(q, k, v)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_cross_entropy_accumulates_like_cpu(dtype):
    # PyTorch picks float32 accumulation ("accurate") for cpu/cuda only;
    # neuron gets the CPU's choice, so chunked loss and gradients match CPU.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 32, generator=g).to(dtype).requires_grad_()
    w = torch.randn(1000, 32, generator=g).to(dtype).requires_grad_()
    target = torch.randint(0, 1000, (64,), generator=g)
    xn, wn = (t.detach().to(DEV).requires_grad_() for t in (x, w))
    ref = F.linear_cross_entropy(x, w, target)
    out = F.linear_cross_entropy(xn, wn, target.to(DEV))
    torch.testing.assert_close(out.cpu(), ref, atol=0, rtol=0)
    ref.backward()
    out.backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad, atol=0, rtol=0)
    torch.testing.assert_close(wn.grad.cpu(), w.grad, atol=0, rtol=0)


def _small_row_operands(rows, n, k, layout, g):
    """a [rows, k] and b [k, n] on neuron, b laid out as a linear layer's
    weight.t(), as contiguous rows, or as a strided slice."""
    a = torch.randn(rows, k, generator=g)
    if layout == "weight_t":
        b = torch.randn(n, k, generator=g).to(DEV).t()
    elif layout == "rows":
        b = torch.randn(k, n, generator=g).to(DEV)
    else:
        b = torch.randn(k, 2 * n, generator=g).to(DEV)[:, ::2]
    return a.to(DEV), b


@pytest.mark.parametrize("rows", [1, 2, 5, 8, 9])
@pytest.mark.parametrize("layout", ["weight_t", "rows", "strided"])
def test_small_row_matmuls_match_cpu(rows, layout, own_routes):
    """Products with few rows (a decode step's tokens times a weight) run the
    host driver's small-GEMM kernel: the CPU's values within float32 rounding,
    for every layout, bias broadcast and scaling."""
    g = torch.Generator().manual_seed(rows)
    for n, k in [(300, 256), (129, 600), (4100, 4), (40, 0), (1, 300)]:
        a, b = _small_row_operands(rows, n, k, layout, g)
        tol = dict(rtol=1e-5, atol=1e-5 * max(k, 1) ** 0.5)
        torch.testing.assert_close((a @ b).cpu(), a.cpu() @ b.cpu(), **tol)
        for bias in (torch.randn(n, generator=g), torch.randn(rows, 1, generator=g),
                     torch.randn(rows, n, generator=g), torch.randn((), generator=g)):
            got = torch.addmm(bias.to(DEV), a, b, beta=0.5, alpha=-2.0)
            expected = torch.addmm(bias, a.cpu(), b.cpu(), beta=0.5, alpha=-2.0)
            assert got.shape == expected.shape and got.is_contiguous()
            torch.testing.assert_close(got.cpu(), expected, **tol)


def test_small_row_matmuls_ignore_beta_zero_bias_and_thread_count(own_routes):
    g = torch.Generator().manual_seed(0)
    a, b = _small_row_operands(2, 768, 256, "weight_t", g)
    nan_bias = torch.full((768,), float("nan"), device=DEV)
    assert not torch.addmm(nan_bias, a, b, beta=0).isnan().any()  # as on CPU: self ignored
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = (a @ b).cpu()
        torch.set_num_threads(2)
        two = (a @ b).cpu()
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)  # each output computed whole by one thread


@pytest.fixture
def own_routes(monkeypatch):
    """The few-row kernel and oneDNN whatever this CPU is (on Intel CPUs the
    default is ATen's kernel: MKL is as fast there)."""
    import openneuron
    monkeypatch.setenv("OPENNEURON_HOST_MATMUL", "own")
    openneuron._C._reload_settings()
    yield
    monkeypatch.delenv("OPENNEURON_HOST_MATMUL")
    openneuron._C._reload_settings()


def _onednn_calls(fn):
    """fn's result and how many matrix products it ran through oneDNN."""
    with torch.profiler.profile() as prof:
        out = fn()
    return out, sum(e.count for e in prof.key_averages() if e.key == "openneuron::onednn_matmul")


def _major(t, major):
    return t.contiguous() if major == "row" else t.t().contiguous().t()


@pytest.mark.parametrize("a_major", ["row", "column"])
@pytest.mark.parametrize("b_major", ["row", "column"])
def test_large_matmuls_run_onednn_and_match_cpu(a_major, b_major, own_routes):
    """Large float32 products (linear layers and their backward) run through
    oneDNN, in every row/column-major layout: the CPU's values within float32
    rounding, about as close to float64 as the CPU's own BLAS."""
    g = torch.Generator().manual_seed(0)
    for m, k, n in [(512, 256, 1024), (1024, 1000, 33), (300, 64, 8000)]:
        a = _major(torch.randn(m, k, generator=g), a_major)
        b = _major(torch.randn(k, n, generator=g), b_major)
        got, calls = _onednn_calls(lambda: torch.mm(a.to(DEV), b.to(DEV)))
        assert calls == 1 and got.is_contiguous() and got.shape == (m, n)
        exact = a.double() @ b.double()
        cpu_error = ((a @ b).double() - exact).abs().max().item()
        assert (got.cpu().double() - exact).abs().max().item() <= 4 * cpu_error + 1e-6
        torch.testing.assert_close(got.cpu(), a @ b, rtol=1e-5, atol=1e-5 * k ** 0.5)


def _cpu_flags():
    info = open("/proc/cpuinfo").read()
    vendor = next((l.split(":")[1].strip() for l in info.splitlines() if l.startswith("vendor_id")), "")
    flags = next((l.split(":")[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    return vendor, flags


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the automatic choice is made for x86 CPUs")
@pytest.mark.parametrize("a_major", ["row", "column"])
@pytest.mark.parametrize("b_major", ["row", "column"])
def test_automatic_route_takes_onednn_where_it_beats_mkl(a_major, b_major, monkeypatch):
    """By default oneDNN runs a product only where it was measured faster
    than MKL: never on Intel CPUs; on others in a linear layer's layout (a
    row-major, b a transposed row-major weight), and in the other layouts
    only with AVX-512 (on AVX2 MKL reads them in place and wins)."""
    import openneuron
    monkeypatch.delenv("OPENNEURON_HOST_MATMUL", raising=False)
    openneuron._C._reload_settings()
    vendor, flags = _cpu_flags()
    linear_layout = a_major == "row" and b_major == "column"
    expected = vendor != "GenuineIntel" and (linear_layout or "avx512f" in flags)
    g = torch.Generator().manual_seed(2)
    a = _major(torch.randn(512, 256, generator=g), a_major)
    b = _major(torch.randn(256, 1024, generator=g), b_major)
    got, calls = _onednn_calls(lambda: torch.mm(a.to(DEV), b.to(DEV)))
    assert calls == int(expected), (vendor, a_major, b_major)
    torch.testing.assert_close(got.cpu(), a @ b, rtol=1e-5, atol=1e-5 * 16)


@pytest.mark.filterwarnings("ignore:TF32 acceleration")
def test_large_matmuls_route_by_bias_scaling_layout_and_mkldnn_switch(own_routes):
    """oneDNN takes mm and addmm with a [n] bias at beta = alpha = 1 (a
    linear layer); other scalings, biases and strided operands, products too
    small to repay oneDNN's setup, and torch.backends.mkldnn.enabled=False
    take ATen's kernel and give the CPU's exact values."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(256, 512, generator=g), torch.randn(512, 384, generator=g)
    bias, bias2d = torch.randn(384, generator=g), torch.randn(256, 384, generator=g)
    an, bn = a.to(DEV), b.to(DEV)
    got, calls = _onednn_calls(lambda: torch.addmm(bias.to(DEV), an, bn))
    assert calls == 1
    torch.testing.assert_close(got.cpu(), torch.addmm(bias, a, b), rtol=1e-5, atol=1e-4)
    aten_routed = [
        (lambda d: torch.addmm(bias.to(d), a.to(d), b.to(d), beta=0.5, alpha=2.0)),
        (lambda d: torch.addmm(bias2d.to(d), a.to(d), b.to(d))),
        (lambda d: torch.mm(a.to(d)[:, ::2], b.to(d)[::2])),   # neither row- nor column-major
        (lambda d: torch.mm(a.to(d)[:16, :64], b.to(d)[:64, :64])),  # small
    ]
    for fn in aten_routed:
        got, calls = _onednn_calls(lambda: fn(DEV))
        assert calls == 0 and torch.equal(got.cpu(), fn("cpu"))
    with torch.backends.mkldnn.flags(enabled=False):
        got, calls = _onednn_calls(lambda: torch.mm(an, bn))
    assert calls == 0 and torch.equal(got.cpu(), a @ b)


@pytest.mark.parametrize("tokens, onednn, atol", [(2, False, 1e-5), (1024, True, 1e-4)])
def test_linear_layers_forward_and_backward_match_cpu(tokens, onednn, atol, own_routes):
    """A decode step's few rows (small-GEMM kernel) and a batch of sequences
    (oneDNN, for the forward and both gradients)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 1000)
    x = torch.randn(tokens // 2, 2, 256, requires_grad=True)
    lin_n = copy.deepcopy(lin).to(DEV)
    x_n = x.detach().to(DEV).requires_grad_()
    out = lin(x)
    out_n, calls = _onednn_calls(lambda: lin_n(x_n))
    torch.testing.assert_close(out_n.cpu(), out, rtol=1e-5, atol=atol)
    out.square().sum().backward()
    _, backward_calls = _onednn_calls(lambda: out_n.square().sum().backward())
    assert (calls, backward_calls) == ((1, 2) if onednn else (0, 0))
    torch.testing.assert_close(x_n.grad.cpu(), x.grad, rtol=1e-5, atol=10 * atol)
    torch.testing.assert_close(lin_n.weight.grad.cpu(), lin.weight.grad, rtol=1e-5, atol=10 * atol)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(torch.ones(2, 3, device=DEV), torch.ones(4, 5, device=DEV))


@pytest.mark.parametrize("route", ["aten", "auto"])
def test_large_matmuls_route_by_cpu_vendor(route, monkeypatch):
    """OPENNEURON_HOST_MATMUL=aten: ATen's kernel, the CPU's exact values;
    auto: oneDNN for a linear layer's product unless the CPU is an Intel one
    (where MKL is as fast); a bad value is refused."""
    import openneuron
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(256, 512, generator=g), torch.randn(384, 512, generator=g).t()
    intel = "GenuineIntel" in open("/proc/cpuinfo").read()
    monkeypatch.setenv("OPENNEURON_HOST_MATMUL", route)
    openneuron._C._reload_settings()
    try:
        got, calls = _onednn_calls(lambda: torch.mm(a.to(DEV), b.to(DEV)))
        assert calls == (0 if route == "aten" or intel else 1)
        if calls == 0:
            assert torch.equal(got.cpu(), a @ b)
        monkeypatch.setenv("OPENNEURON_HOST_MATMUL", "mkl")
        with pytest.raises(ValueError, match="OPENNEURON_HOST_MATMUL='mkl' is not valid"):
            openneuron._C._reload_settings()
    finally:
        monkeypatch.delenv("OPENNEURON_HOST_MATMUL")
        openneuron._C._reload_settings()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_accumulating_row_updates_match_cpu(dtype):
    """index_put_(self, [rows], values, accumulate=True), the embedding
    gradient's update, on the host's row kernel: 1-d and n-d indices,
    negative and repeated rows, the functional form leaving self alone; an
    index out of range raises ATen's error naming the op, and self is
    unchanged; other forms (broadcast values, strided self, no accumulate)
    take ATen's kernel."""
    g = torch.Generator().manual_seed(3)
    table = torch.randn(50, 4, 3, generator=g, dtype=dtype)
    for index in (torch.tensor([1, -1, 7, 1, 1, 49]), torch.randint(-50, 50, (5, 7), generator=g)):
        values = torch.randn(*index.shape, 4, 3, generator=g, dtype=dtype)
        want = table.clone().index_put_((index,), values, accumulate=True)
        t = table.to(DEV)
        got = t.index_put((index.to(DEV),), values.to(DEV), accumulate=True)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
        assert torch.equal(t.cpu(), table)  # functional: self untouched
        t.index_put_((index.to(DEV),), values.to(DEV), accumulate=True)
        torch.testing.assert_close(t.cpu(), want, rtol=1e-6, atol=1e-6)
    t = table.to(DEV)
    with pytest.raises(IndexError, match="index 50 is out of bounds for dimension 0 with size 50.*index_put_"):
        t.index_put_((torch.tensor([0, 50], device=DEV),), torch.ones(2, 4, 3, device=DEV, dtype=dtype), True)
    assert torch.equal(t.cpu(), table)
    index, row = torch.tensor([3, 3, 0]), torch.randn(4, 3, generator=g, dtype=dtype)
    for fn in (lambda t, i, v: t.index_put_((i,), v, accumulate=True),                  # broadcast values
               lambda t, i, v: t.transpose(1, 2).index_put_((i,), v.t(), accumulate=True),  # strided self
               lambda t, i, v: t.index_put_((i,), v.expand(3, 4, 3), accumulate=False)):
        want = fn(table.clone(), index, row)
        torch.testing.assert_close(fn(table.to(DEV), index.to(DEV), row.to(DEV)).cpu(), want, rtol=1e-6, atol=1e-6)


def test_foreach_ops_over_many_aliasing_tensors_match_cpu():
    """Tensor lists longer than the views' scanned prefix (hash-indexed):
    repeated tensors and views of one storage alias as on CPU."""
    def run(dev):
        base = torch.arange(60, dtype=torch.float32, device=dev).reshape(20, 3)
        rows = list(base.unbind(0))                  # 20 views of one storage
        t = torch.ones(4, device=dev)
        torch._foreach_mul_([t] * 12, 2.0)           # one tensor, 12 times: 2**12
        torch._foreach_add_(rows + rows[:5], 1.0)    # the first 5 rows twice
        sums = torch._foreach_add(rows, rows[::-1])  # fresh results
        torch._foreach_addcmul_(rows, sums, rows, value=0.5)
        return [base, t, *sums]
    for got, expected in zip(run(DEV), run("cpu")):
        assert got.device.type == "neuron"
        assert torch.equal(got.cpu(), expected)
