"""fork(): a child forked after the parent used the device cannot use it
(its queues' worker threads did not survive the fork) and must say so with a
clear error naming fork and spawn, as CUDA does; a child forked before any
device use, or started with 'spawn', works."""
import pytest

from conftest import run_python

pytestmark = pytest.mark.timeout(120)


def test_fork_before_and_after_device_use():
    proc = run_python(
        """
        import os, signal, torch
        N = torch.neuron

        def in_child(body):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                signal.alarm(20)
                try:
                    out = body()
                except Exception as e:
                    out = f"{type(e).__name__}: {e}"
                os.write(w, out.encode())
                os._exit(0)
            os.close(w)
            data = b""
            while chunk := os.read(r, 65536):
                data += chunk
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
            return data.decode()

        # 1. forked before the parent touched the device: the child may use it
        assert not N.is_initialized()
        print("before:", in_child(lambda: f"{N._is_in_bad_fork()} {torch.ones(3, device='neuron').sum().item()}"))

        # 2. after: the child is in a bad fork and every device use says so
        x = torch.arange(4.0, device="neuron")
        assert N.is_initialized() and not N._is_in_bad_fork()
        print("flag:", in_child(lambda: str(N._is_in_bad_fork())))
        for name, use in [
            ("factory", lambda: torch.ones(2, device="neuron")),
            ("op", lambda: x + 1),
            ("item", lambda: x.sum().item()),
            ("h2d", lambda: torch.ones(2).to("neuron")),
            ("randn", lambda: torch.randn(2, device="neuron")),
            ("event", lambda: N.Event().record()),
        ]:
            print(name + ":", in_child(lambda: repr(use())).splitlines()[0])
        # CPU work in the child is unaffected
        print("cpu:", in_child(lambda: str((torch.ones(3) * 2).sum().item())))
        # and the parent keeps working
        print("parent:", (x * 2).sum().item())
        """,
    )
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert lines["before"] == "False 3.0"
    assert lines["flag"] == "True"
    for name in ("factory", "op", "item", "h2d", "randn", "event"):
        message = lines[name]
        assert message.startswith("RuntimeError"), (name, message)
        assert "fork" in message and "spawn" in message, (name, message)
    assert lines["cpu"] == "6.0"
    assert lines["parent"] == "12.0"


def test_multiprocessing_fork_and_spawn(tmp_path):
    proc = run_python(
        """
        import multiprocessing as mp
        import torch

        def use_device(queue):
            try:
                queue.put(("ok", torch.ones(2, device="neuron").sum().item(), torch.neuron._is_in_bad_fork()))
            except RuntimeError as e:
                queue.put(("error", str(e), torch.neuron._is_in_bad_fork()))

        if __name__ == "__main__":
            torch.ones(1, device="neuron")  # the parent initialises the device
            for method in ("fork", "spawn"):
                ctx = mp.get_context(method)
                queue = ctx.Queue()
                p = ctx.Process(target=use_device, args=(queue,))
                p.start()
                result = queue.get(timeout=60)
                p.join(60)
                print(method, result[0], result[2], str(result[1]).replace(chr(10), " "))
        """,
        timeout=110,
        script_dir=tmp_path,
    )
    fork_line, spawn_line = proc.stdout.splitlines()
    assert fork_line.startswith("fork error True"), fork_line
    assert "spawn" in fork_line
    assert spawn_line == "spawn ok False 2.0"


def test_bad_fork_child_with_pending_work_raises_instead_of_hanging():
    proc = run_python(
        """
        import os, signal, torch
        src = torch.ones(1 << 26).pin_memory()
        dst = torch.empty(1 << 26, device="neuron")
        for which in ("synchronize", "cpu"):
            for _ in range(4):
                dst.copy_(src, non_blocking=True)   # work still queued at fork
            pid = os.fork()
            if pid == 0:
                signal.alarm(2)  # a hang ends here
                try:
                    torch.neuron.synchronize() if which == "synchronize" else dst[:2].cpu()
                    print(which, "returned", flush=True)
                except RuntimeError as e:
                    print(which, "error", "fork" in str(e), flush=True)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                print(which, "hung", flush=True)
            torch.neuron.synchronize()
        """,
        timeout=60,
    )
    assert proc.stdout.splitlines() == ["synchronize error True", "cpu error True"], proc.stdout
