"""Train a small character-level GPT on Hamlet.

    python demo/train_gpt.py                         # on the "neuron" device
    python demo/train_gpt.py --device cpu --steps 30
    python demo/train_gpt.py --compare               # neuron, then cpu, side by side

The "neuron" device appears when PyTorch autoloads the OpenNeuron backend; this
script never imports it. Everything device-specific follows from --device.

For benchmarks: `from demo.train_gpt import GPT, GPTConfig, make_batch, train_step`.
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hamlet.txt")
WARMUP_STEPS = 5  # steps left out of the mean tokens/s


# ----------------------------------------------------------------------------- model

@dataclass
class GPTConfig:
    vocab_size: int = 65  # distinct characters in data/hamlet.txt
    block_size: int = 128
    n_layer: int = 4
    n_head: int = 6
    n_embd: int = 192


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        future = torch.triu(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head_dim)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd),
            nn.GELU(),
            nn.Linear(4 * cfg.n_embd, cfg.n_embd),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied input/output embedding
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1))

    @torch.no_grad()
    def generate(self, idx, n_new, generator):
        """Sample n_new tokens after idx (a CPU tensor); sampling runs on CPU with `generator`."""
        device = next(self.parameters()).device
        for _ in range(n_new):
            logits, _ = self(idx[:, -self.cfg.block_size:].to(device))
            probs = F.softmax(logits[:, -1], dim=-1).cpu()
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
        return idx


# ----------------------------------------------------------------------------- training

def load_text(path=DATA_PATH):
    """Return (data, chars): the text as a 1-D int64 CPU tensor of character ids, and the vocabulary."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return torch.tensor([stoi[c] for c in text], dtype=torch.long), chars


def make_batch(data, batch_size, block_size, generator, device):
    """Sample (x, y) windows on CPU with `generator`, so every device sees the same data order."""
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    chunk = data[ix[:, None] + torch.arange(block_size + 1)]
    return chunk[:, :-1].contiguous().to(device), chunk[:, 1:].contiguous().to(device)


def make_optimizer(model, lr, weight_decay=0.1):
    """AdamW; weight decay on matrices only (not biases, LayerNorm or position vectors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def lr_at(step, steps, max_lr):
    """Linear warmup for the first 10% of steps (at most 20), then cosine decay to max_lr / 10."""
    warmup = max(1, min(20, steps // 10))
    if step < warmup:
        return max_lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    min_lr = max_lr / 10
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def train_step(model, optimizer, x, y, grad_clip=1.0):
    """One forward/backward/update; returns the (detached, on-device) loss."""
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.detach()


# ----------------------------------------------------------------------------- reporting

class SimpleBar:
    """Minimal stand-in for tqdm: one line on stderr, redrawn with \\r."""

    def __init__(self, total, desc):
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""

    def set_postfix_str(self, s):
        self.postfix = s

    def update(self, n=1):
        self.n += n
        filled = 30 * self.n // self.total
        bar = "#" * filled + "." * (30 - filled)
        sys.stderr.write(f"\r{self.desc} {self.n}/{self.total} [{bar}] {self.postfix}")
        sys.stderr.flush()

    def close(self):
        sys.stderr.write("\n")


def progress_bar(total, desc):
    try:
        from tqdm import tqdm
    except ImportError:
        return SimpleBar(total, desc)
    return tqdm(total=total, desc=desc, file=sys.stderr)


def peak_rss_mib():
    """Peak resident memory of this process. On Linux VmHWM, since ru_maxrss
    survives exec and would report a parent's peak for a child process."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


# ----------------------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="neuron", help="torch device to train on (default: neuron)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--compile", action="store_true",
                   help='torch.compile the model (backend "neuron" on neuron, else "inductor")')
    p.add_argument("--compare", action="store_true",
                   help="afterwards run the same training on cpu and print a comparison")
    p.add_argument("--save", metavar="PATH", help="save model + optimizer state and step here at the end")
    p.add_argument("--json-out", metavar="PATH", help="write the run's numbers as JSON (used by --compare)")
    return p.parse_args(argv)


def train(args):
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        sys.exit(f"unknown device {args.device!r}: {e}\n"
                 "(the 'neuron' device exists only once PyTorch can autoload the OpenNeuron backend)")

    data, chars = load_text()
    cfg = GPTConfig(vocab_size=len(chars), block_size=args.block_size)
    torch.manual_seed(args.seed)
    model = GPT(cfg).to(device)  # initialised on CPU, so weights match on every device
    optimizer = make_optimizer(model, args.lr)
    step_model = model
    if args.compile:
        step_model = torch.compile(model, backend="neuron" if device.type == "neuron" else "inductor")

    n_params = sum(p.numel() for p in model.parameters())
    print(f"device={device} params={n_params / 1e6:.2f}M text={len(data):,} chars vocab={len(chars)} "
          f"batch={args.batch_size}x{args.block_size} steps={args.steps} compile={args.compile}")

    gen = torch.Generator().manual_seed(args.seed)
    tokens_per_step = args.batch_size * args.block_size
    losses, times = [], []
    bar = progress_bar(args.steps, f"train[{device.type}]")
    t_start = time.perf_counter()
    for step in range(args.steps):
        t0 = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        x, y = make_batch(data, args.batch_size, args.block_size, gen, device)
        loss = train_step(step_model, optimizer, x, y).item()  # .item() waits for the device
        dt = time.perf_counter() - t0
        losses.append(loss)
        times.append(dt)
        bar.set_postfix_str(f"loss {loss:.4f} | {tokens_per_step / dt:,.0f} tok/s")
        bar.update(1)
    bar.close()
    wall = time.perf_counter() - t_start

    timed = times[WARMUP_STEPS:] or times
    result = {
        "device": str(device),
        "steps": args.steps,
        "final_loss": losses[-1],
        "losses": losses,
        "tokens_per_s": tokens_per_step * len(timed) / sum(timed),
        "wall_s": wall,
        "peak_rss_mib": peak_rss_mib(),
    }

    prompt = "Ham.\n"
    stoi = {c: i for i, c in enumerate(chars)}
    model.eval()
    out = model.generate(torch.tensor([[stoi[c] for c in prompt]]), 100,
                         torch.Generator().manual_seed(args.seed))
    sample = "".join(chars[i] for i in out[0].tolist())

    print(f"final loss      {result['final_loss']:.4f}  (first {losses[0]:.4f})")
    print(f"mean tokens/s   {result['tokens_per_s']:,.0f}  (excluding the first {WARMUP_STEPS} steps)")
    print(f"wall time       {wall:.1f} s")
    print(f"peak RSS        {result['peak_rss_mib']:,.0f} MiB")
    print(f"sample:\n{sample}")

    if args.save:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": args.steps, "config": asdict(cfg), "chars": chars}, args.save)
        print(f"saved checkpoint to {args.save}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f)
    return result


def run_cpu_reference(args):
    """Run this script again with --device cpu in a child process (ru_maxrss is per process)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cpu.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--device", "cpu",
               "--steps", str(args.steps), "--batch-size", str(args.batch_size),
               "--block-size", str(args.block_size), "--lr", str(args.lr),
               "--seed", str(args.seed), "--json-out", out]
        if args.compile:
            cmd.append("--compile")
        subprocess.run(cmd, check=True)
        with open(out) as f:
            return json.load(f)


def print_comparison(dev, cpu):
    name = dev["device"]
    rows = [
        ("final loss", "final_loss", "{:.4f}"),
        ("mean tokens/s", "tokens_per_s", "{:,.0f}"),
        ("wall time (s)", "wall_s", "{:.1f}"),
        ("peak RSS (MiB)", "peak_rss_mib", "{:,.0f}"),
    ]
    print(f"\n{'':16}{name:>12}{'cpu':>12}{'ratio':>9}")
    for label, key, fmt in rows:
        ratio = dev[key] / cpu[key] if cpu[key] else float("nan")
        print(f"{label:16}{fmt.format(dev[key]):>12}{fmt.format(cpu[key]):>12}{ratio:>8.2f}x")
    diff = max(abs(a - b) for a, b in zip(dev["losses"], cpu["losses"]))
    print(f"max |loss difference| over {len(dev['losses'])} steps: {diff:.2e}")


def main(argv=None):
    args = parse_args(argv)
    result = train(args)
    if args.compare:
        print("\n--- same training on cpu ---", flush=True)
        print_comparison(result, run_cpu_reference(args))


if __name__ == "__main__":
    main()
