"""Scenarios run under torchrun by tests/python/test_distributed.py.

Each checks neuron results against the same collective run by Gloo on CPU
tensors (a second group), and exits non-zero on any mismatch."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DEVICE = torch.device("neuron", RANK % torch.neuron.device_count())


def init(timeout_s=60):
    torch.neuron.set_device(DEVICE)
    dist.init_process_group("cpu:gloo,neuron:neuron", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.new_group(backend="gloo")


def same(neuron_value, cpu_value, what):
    if isinstance(neuron_value, (list, tuple)):
        for i, (n, c) in enumerate(zip(neuron_value, cpu_value)):
            same(n, c, f"{what}[{i}]")
        return
    assert neuron_value.device.type == "neuron", f"{what}: result on {neuron_value.device}"
    torch.testing.assert_close(neuron_value.cpu(), cpu_value, msg=lambda m: f"{what}: {m}")


def data(shape=(5,), seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed * 100 + RANK)
    return (torch.randn(shape, generator=g) * 4).round().to(dtype)


def both(fn, *cpu_args):
    """Runs fn on CPU tensors with Gloo and on neuron copies with neuron."""
    cpu = [a.clone() if isinstance(a, torch.Tensor) else [t.clone() for t in a] for a in cpu_args]
    dev = [a.to(DEVICE) if isinstance(a, torch.Tensor) else [t.to(DEVICE) for t in a] for a in cpu_args]
    fn(cpu, GLOO)
    fn(dev, None)
    return dev, cpu


def collectives():
    global GLOO
    GLOO = init()
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    for op in ops:
        dev, cpu = both(lambda a, g: dist.all_reduce(a[0], op=op, group=g), data())
        same(dev[0], cpu[0], f"all_reduce {op}")
    t = data()
    avg = t.to(DEVICE)
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    ref = t.clone()
    dist.all_reduce(ref, group=GLOO)
    same(avg, ref / WORLD, "all_reduce AVG")
    work = dist.all_reduce(t.to(DEVICE), async_op=True)
    value = work.get_future().wait()[0]
    assert value.device.type == "neuron", value.device
    dev, cpu = both(lambda a, g: dist.all_reduce_coalesced(a[0], group=g), [data(seed=1), data((3, 2), seed=2)])
    same(dev[0], cpu[0], "all_reduce_coalesced")
    for root in range(WORLD):
        dev, cpu = both(lambda a, g: dist.broadcast(a[0], src=root, group=g), data(seed=3))
        same(dev[0], cpu[0], f"broadcast from {root}")
        dev, cpu = both(lambda a, g: dist.reduce(a[0], dst=root, group=g), data(seed=4))
        if RANK == root:
            same(dev[0], cpu[0], f"reduce to {root}")
    dev, cpu = both(lambda a, g: dist.all_gather(a[1], a[0], group=g), data(seed=5), [torch.zeros(5) for _ in range(WORLD)])
    same(dev[1], cpu[1], "all_gather")
    dev, cpu = both(lambda a, g: dist.all_gather_into_tensor(a[1], a[0], group=g), data(seed=6), torch.zeros(5 * WORLD))
    same(dev[1], cpu[1], "all_gather_into_tensor")
    gather_list = [torch.zeros(5) for _ in range(WORLD)] if RANK == 0 else []
    dev, cpu = both(lambda a, g: dist.gather(a[0], a[1] if RANK == 0 else None, dst=0, group=g), data(seed=7), gather_list)
    if RANK == 0:
        same(dev[1], cpu[1], "gather")
    scatter_list = [data(seed=8 + i) for i in range(WORLD)] if RANK == 0 else []
    dev, cpu = both(lambda a, g: dist.scatter(a[0], a[1] if RANK == 0 else None, src=0, group=g), torch.zeros(5), scatter_list)
    same(dev[0], cpu[0], "scatter")
    dev, cpu = both(lambda a, g: dist.reduce_scatter(a[0], a[1], group=g), torch.zeros(5), [data(seed=20 + i) for i in range(WORLD)])
    same(dev[0], cpu[0], "reduce_scatter")
    dev, cpu = both(lambda a, g: dist.reduce_scatter_tensor(a[0], a[1], group=g), torch.zeros(3), data((3 * WORLD,), seed=30))
    same(dev[0], cpu[0], "reduce_scatter_tensor")
    dev, cpu = both(lambda a, g: dist.all_to_all(a[0], a[1], group=g), [torch.zeros(2) for _ in range(WORLD)], [data((2,), seed=40 + i) for i in range(WORLD)])
    same(dev[0], cpu[0], "all_to_all")
    # uneven all_to_all_single: rank r sends r + j + 1 elements to rank j
    in_splits = [RANK + j + 1 for j in range(WORLD)]
    out_splits = [j + RANK + 1 for j in range(WORLD)]
    dev, cpu = both(lambda a, g: dist.all_to_all_single(a[0], a[1], out_splits, in_splits, group=g), torch.zeros(sum(out_splits)), data((sum(in_splits),), seed=50))
    same(dev[0], cpu[0], "all_to_all_single (uneven)")
    # point to point, in a ring, and receive from any source
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    payload = data(seed=60).to(DEVICE)
    received = torch.zeros(5, device=DEVICE)
    ops_p2p = [dist.P2POp(dist.isend, payload, nxt), dist.P2POp(dist.irecv, received, prv)]
    for w in dist.batch_isend_irecv(ops_p2p):
        w.wait()
    expected = (torch.randn((5,), generator=torch.Generator().manual_seed(6000 + prv)) * 4).round()
    same(received, expected, "isend/irecv ring")
    if RANK == 0:
        sources = set()
        for _ in range(WORLD - 1):
            buf = torch.zeros(1, device=DEVICE)
            sources.add(dist.recv(buf))
            assert buf.item() == 100 + sources.__len__() - 1 or buf.item() >= 100
        assert sources == set(range(1, WORLD)), sources
    else:
        dist.send(torch.tensor([100.0 + RANK], device=DEVICE), 0)
    # subgroups and a barrier on a subgroup
    evens = dist.new_group([r for r in range(WORLD) if r % 2 == 0], backend="neuron")
    if RANK % 2 == 0:
        t = torch.ones(1, device=DEVICE)
        dist.all_reduce(t, group=evens)
        assert t.item() == len(range(0, WORLD, 2)), t
        dist.barrier(group=evens)
    large_and_typed()
    backend = dist.group.WORLD._get_backend(DEVICE)
    expect_shm = os.environ.get("OPENNEURON_DIST_SHM", "1") != "0"
    assert backend.uses_shared_memory == expect_shm, (type(backend), backend.uses_shared_memory)
    dist.barrier()
    print(f"rank {RANK}: collectives OK", flush=True)


def large_and_typed():
    """Tensors larger than a shared-memory slot (several chunks, sizes not a
    multiple of it), non-contiguous ones, and dtypes x ops, against Gloo."""
    big = 3_000_001  # 12 MB of float32: three 4 MiB chunks and a bit
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        dev, cpu = both(lambda a, g: dist.all_reduce(a[0], op=op, group=g), data((big,), seed=70))
        same(dev[0], cpu[0], f"all_reduce {op} of {big} elements")
    strided = data((64, 2049), seed=71).to(DEVICE).t()
    expected = strided.cpu().contiguous()
    dist.all_reduce(expected, group=GLOO)
    dist.all_reduce(strided)
    same(strided, expected, "all_reduce of a transposed tensor")
    for root in (0, WORLD - 1):
        dev, cpu = both(lambda a, g: dist.broadcast(a[0], src=root, group=g), data((big,), seed=75))
        same(dev[0], cpu[0], f"broadcast of {big} elements from {root}")
    z = torch.complex(data((300,), seed=76), data((300,), seed=77))
    dev, cpu = both(lambda a, g: dist.broadcast(a[0], src=WORLD - 1, group=g), z)
    same(dev[0], cpu[0], "broadcast complex64")
    dev, cpu = both(lambda a, g: dist.all_gather_into_tensor(a[1], a[0], group=g), z,
                    torch.zeros(300 * WORLD, dtype=torch.complex64))
    same(dev[1], cpu[1], "all_gather_into_tensor complex64")
    dev, cpu = both(lambda a, g: dist.all_gather_into_tensor(a[1], a[0], group=g),
                    data((big // 2,), seed=72), torch.zeros(big // 2 * WORLD))
    same(dev[1], cpu[1], "all_gather_into_tensor, chunked")
    dev, cpu = both(lambda a, g: dist.reduce_scatter_tensor(a[0], a[1], group=g),
                    torch.zeros(big // 3), data((big // 3 * WORLD,), seed=73))
    same(dev[0], cpu[0], "reduce_scatter_tensor, chunked")
    cases = [(torch.float64, dist.ReduceOp.PRODUCT), (torch.int64, dist.ReduceOp.SUM), (torch.int32, dist.ReduceOp.MIN),
             (torch.bfloat16, dist.ReduceOp.SUM), (torch.float16, dist.ReduceOp.MAX), (torch.uint8, dist.ReduceOp.BXOR),
             (torch.bool, dist.ReduceOp.MAX), (torch.int32, dist.ReduceOp.BAND),
             (torch.int8, dist.ReduceOp.SUM), (torch.complex64, dist.ReduceOp.SUM)]
    for dtype, op in cases:
        x = (data((1000,), seed=74) % 7).abs().to(dtype)
        dev, cpu = both(lambda a, g: dist.all_reduce(a[0], op=op, group=g), x)
        same(dev[0], cpu[0], f"all_reduce {op} {dtype}")
        dev, cpu = both(lambda a, g: dist.all_gather_into_tensor(a[1], a[0], group=g), x, torch.zeros(1000 * WORLD, dtype=dtype))
        same(dev[1], cpu[1], f"all_gather_into_tensor {dtype}")


def ddp():
    init()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference.load_state_dict(model.state_dict())
    reference.to(DEVICE)
    ddp_model = torch.nn.parallel.DistributedDataParallel(model.to(DEVICE), bucket_cap_mb=0.0001)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for step in range(4):
        batch = torch.randn(WORLD * 4, 8, generator=g)
        target = torch.randn(WORLD * 4, 4, generator=g)
        mine = slice(RANK * 4, RANK * 4 + 4)
        if step == 1:  # gradient accumulation without sync, then a synced step
            with ddp_model.no_sync():
                torch.nn.functional.mse_loss(ddp_model(batch[mine].to(DEVICE)), target[mine].to(DEVICE)).backward()
        torch.nn.functional.mse_loss(ddp_model(batch[mine].to(DEVICE)), target[mine].to(DEVICE)).backward()
        opt.step()
        opt.zero_grad()
        # single-device reference on the whole batch (per-rank losses averaged)
        loss = sum(torch.nn.functional.mse_loss(reference(batch[r * 4:r * 4 + 4].to(DEVICE)), target[r * 4:r * 4 + 4].to(DEVICE)) for r in range(WORLD)) / WORLD
        if step == 1:
            loss = loss * 2  # the accumulated no_sync backward adds the same gradient again
        loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
    for p, q in zip(ddp_model.module.parameters(), reference.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), atol=1e-5, rtol=1e-4)
    print(f"rank {RANK}: ddp OK", flush=True)


def fsdp2():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    init()
    mesh = init_device_mesh("neuron", (WORLD,))
    mixed = os.environ.get("NEURON_TEST_MIXED") == "1"
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)]
    model = torch.nn.Sequential(*layers).to(DEVICE)
    reference = torch.nn.Sequential(*[type(l)(l.in_features, l.out_features) if isinstance(l, torch.nn.Linear) else torch.nn.GELU() for l in layers]).to(DEVICE)
    reference.load_state_dict(model.state_dict())
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else MixedPrecisionPolicy()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        batch, target = torch.randn(WORLD * 4, 8, generator=g), torch.randn(WORLD * 4, 4, generator=g)
        mine = slice(RANK * 4, RANK * 4 + 4)
        torch.nn.functional.mse_loss(model(batch[mine].to(DEVICE)).float(), target[mine].to(DEVICE)).backward()
        opt.step()
        opt.zero_grad()
        ref_in = batch.to(DEVICE)
        if mixed:
            with torch.autocast("neuron", dtype=torch.bfloat16):
                out = reference(ref_in)
        else:
            out = reference(ref_in)
        torch.nn.functional.mse_loss(out.float(), target.to(DEVICE)).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    tol = dict(atol=3e-2, rtol=3e-2) if mixed else dict(atol=1e-5, rtol=1e-4)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.full_tensor().cpu(), q.detach().cpu(), **tol, msg=lambda m: f"{name}: {m}")
    print(f"rank {RANK}: fsdp2 OK", flush=True)


class Attention(torch.nn.Module):
    def __init__(self, dim=16, head_dim=4):
        super().__init__()
        self.head_dim = head_dim  # heads are split across ranks, not head_dim
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.o = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, t, _ = x.shape
        split = lambda y: y.view(b, t, -1, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


def parallel_pairs(mesh):
    """An MLP and an attention block split across ranks (Colwise then
    Rowwise), each with an unsplit copy holding the same parameters."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).to(DEVICE)
    attn = Attention().to(DEVICE)
    ref_mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).to(DEVICE)
    ref_attn = Attention().to(DEVICE)
    ref_mlp.load_state_dict(mlp.state_dict())
    ref_attn.load_state_dict(attn.state_dict())
    parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    parallelize_module(attn, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel()})
    return ((mlp, ref_mlp, "mlp"), (attn, ref_attn, "attention"))


def check_parallel_pairs(pairs, wrap=lambda m: m):
    """Forward and parameter gradients of each split model match its copy."""
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    for model, ref, name in pairs:
        out, ref_out = wrap(model)(x), ref(x)
        torch.testing.assert_close(out.cpu(), ref_out.cpu(), atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")
        out.sum().backward()
        ref_out.sum().backward()
        for (pname, p), q in zip(model.named_parameters(), ref.parameters()):
            grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            torch.testing.assert_close(grad.cpu(), q.grad.cpu(), atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}.{pname}: {m}")


def tensor_parallel():
    from torch.distributed.device_mesh import init_device_mesh

    init()
    check_parallel_pairs(parallel_pairs(init_device_mesh("neuron", (WORLD,))))
    print(f"rank {RANK}: tensor_parallel OK", flush=True)


def split():
    """split_group: disjoint halves, a split of a split, a 2-D DeviceMesh
    (made by splitting), a group leaving ranks out; neuron and CPU tensors
    (4 ranks)."""
    from torch.distributed.device_mesh import init_device_mesh

    backend = os.environ["NEURON_TEST_BACKEND"]
    torch.neuron.set_device(DEVICE)
    dist.init_process_group(backend, device_id=DEVICE, timeout=datetime.timedelta(seconds=60))
    halves = [[0, 1], [2, 3]]
    half = dist.split_group(split_ranks=halves)
    members = halves[RANK // 2]
    assert dist.get_process_group_ranks(half) == members, dist.get_process_group_ranks(half)
    for device in (DEVICE, torch.device("cpu")):
        x = torch.full((3,), float(RANK), device=device)
        dist.all_reduce(x, group=half)
        assert x.tolist() == [float(sum(members))] * 3, (device, x)
    single = dist.split_group(parent_pg=half, split_ranks=[[0], [1]])  # ranks of `half`
    assert dist.get_process_group_ranks(single) == [RANK], dist.get_process_group_ranks(single)
    dist.barrier(group=half)

    def check_mesh():
        mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
        for dim, expected in (("dp", [RANK % 2, RANK % 2 + 2]), ("tp", members)):
            group = mesh.get_group(dim)
            assert dist.get_process_group_ranks(group) == expected, (dim, dist.get_process_group_ranks(group))
            x = torch.full((2,), float(RANK), device=DEVICE)
            dist.all_reduce(x, group=group)
            assert x.tolist() == [float(sum(expected))] * 2, (dim, x)

    check_mesh()
    ends = dist.split_group(split_ranks=[[0, 3]])
    assert (ends is None) == (RANK in (1, 2)), ends
    if ends is not None:
        gathered = torch.empty(2, device=DEVICE)
        dist.all_gather_into_tensor(gathered, torch.tensor([float(RANK)], device=DEVICE), group=ends)
        assert gathered.tolist() == [0.0, 3.0], gathered
    if backend == "neuron":
        # After a split that left ranks out, PyTorch names the next groups
        # differently on different ranks; Gloo's own split (the cpu part of
        # "cpu:gloo,...") then never meets, neuron's does.
        check_mesh()
    print(f"rank {RANK}: split OK", flush=True)


def compiled():
    """Functional collectives, traced c10d calls and DTensor tensor
    parallelism inside torch.compile(backend="neuron"), against eager."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    import openneuron.compiler

    init()
    group = dist.group.WORLD

    def autograd_collectives(x):
        a = funcol.all_gather_tensor_autograd(x.sin(), 0, group)
        b = funcol.reduce_scatter_tensor_autograd(a * 3, "sum", 0, group)
        c = funcol.all_to_all_single_autograd(b.cos(), None, None, group)
        return (c * c).sum() + funcol.all_reduce(b.detach(), "max", group).sum()

    def traced_c10d_calls(y):
        y = y * 2
        dist.all_reduce(y)
        out = torch.empty(WORLD * y.numel(), device=y.device)
        dist.all_gather_into_tensor(out, y)
        return y + out.view(WORLD, -1).sum(0)

    x = data((WORLD * 2, 3), seed=1).to(DEVICE).requires_grad_()
    expected = autograd_collectives(x)
    expected.backward()
    expected_grad, x.grad = x.grad, None
    got = torch.compile(autograd_collectives, backend="neuron", fullgraph=True)(x)
    got.backward()
    same(got, expected.cpu(), "compiled functional collectives")
    same(x.grad, expected_grad.cpu(), "compiled functional collectives, gradient")
    y = data((5,), seed=2).to(DEVICE)
    same(torch.compile(traced_c10d_calls, backend="neuron", fullgraph=True)(y), traced_c10d_calls(y).cpu(),
         "compiled all_reduce + all_gather_into_tensor")
    check_parallel_pairs(parallel_pairs(init_device_mesh("neuron", (WORLD,))),
                         wrap=lambda m: torch.compile(m, backend="neuron"))
    m = openneuron.compiler.metrics()
    assert m["graphs_fallback"] == 0 and not m["fallback_ops"], m
    assert m["extern_ops"].get("_c10d_functional.all_reduce.default"), m
    print(f"rank {RANK}: compiled OK", flush=True)


def abort():
    """An in-flight collective fails at once when its group is aborted (rank
    1 never joins it)."""
    init()
    x = torch.ones(10, device=DEVICE)
    dist.all_reduce(x)
    if RANK == 1:
        time.sleep(3)
        return
    work = dist.all_reduce(x, async_op=True)
    time.sleep(0.3)
    start = time.time()
    dist.distributed_c10d._abort_process_group()
    try:
        work.wait()
        raise AssertionError("the aborted collective completed")
    except dist.DistBackendError as error:
        assert "the group was aborted" in str(error), error
    assert time.time() - start < 2, time.time() - start
    print(f"rank {RANK}: abort OK", flush=True)


def dead_rank():
    """DDP training in which rank 1 is killed (SIGKILL) at step 3: the
    others must fail with a clear error, not hang."""
    import signal

    from torch.nn.parallel import DistributedDataParallel

    init(timeout_s=int(os.environ.get("NEURON_TEST_TIMEOUT", "10")))
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(DEVICE))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1000):
        if RANK == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.time()
        try:
            loss = model(torch.randn(16, 32, device=DEVICE)).square().mean()
            loss.backward()  # DDP's allreduce of the gradients
            opt.step()
            opt.zero_grad()
            loss.item()
        except Exception as error:  # noqa: BLE001
            print(f"rank {RANK}: error after {time.time() - start:.1f}s at step {step}: {error}", flush=True)
            # os._exit: on the Gloo path an interpreter shutdown right after
            # the error can still abort in a transport thread (see notes).
            os._exit(3)
    print(f"rank {RANK}: finished without noticing the dead rank", flush=True)


if __name__ == "__main__":
    scenarios = {"collectives": collectives, "ddp": ddp, "fsdp2": fsdp2,
                 "tensor_parallel": tensor_parallel, "split": split, "compiled": compiled, "abort": abort, "dead_rank": dead_rank}
    scenarios[sys.argv[1]]()
    if dist.is_initialized():
        dist.destroy_process_group()
