"""Training on neuron matches training on CPU: forward, backward and the
optimizers (with their foreach variants) for an MLP, a small CNN and a small
transformer language model; clipping, accumulation, checkpoint and resume."""
import copy
import io

import pytest
import torch

from conftest import host_path_only
import torch.nn as nn
import torch.nn.functional as F

DEVICE = "neuron"


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.gelu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyLM(nn.Module):
    def __init__(self, vocab=32, dim=32, heads=4, layers=2, block=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(block, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied, must stay tied on neuron
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block), persistent=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[: idx.size(1)]
        x = self.encoder(x, mask=self.mask[: idx.size(1), : idx.size(1)], is_causal=True)
        return self.head(x)


def batches(kind, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        if kind == "mlp":
            yield torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        elif kind == "cnn":
            yield torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 4, (4,), generator=g)
        else:
            tokens = torch.randint(0, 32, (4, 17), generator=g)
            yield tokens[:, :-1], tokens[:, 1:]


def make_model(kind):
    torch.manual_seed(0)
    return {"mlp": mlp, "cnn": SmallCNN, "lm": TinyLM}[kind]()


def loss_of(kind, model, x, y):
    out = model(x)
    return F.cross_entropy(out.flatten(0, -2) if kind == "lm" else out, y.flatten() if kind == "lm" else y)


def train(kind, device, make_opt, steps=4, accumulate=1, clip=None):
    model = make_model(kind).to(device)
    opt = make_opt(model.parameters())
    losses = []
    for step, (x, y) in enumerate(batches(kind, steps * accumulate)):
        loss = loss_of(kind, model, x.to(device), y.to(device)) / accumulate
        loss.backward()
        losses.append(loss.item())
        if (step + 1) % accumulate == 0:
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
    return model, losses


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False),
    "sgd_foreach": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False),
    "adam_foreach": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=False),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True, amsgrad=True),
}


def _noise_only(name, p):
    """The part of a parameter whose gradient is zero in exact arithmetic, so
    that what Adam does with it is rounding noise scaled up to lr: a conv's
    bias under BatchNorm (which removes the mean), and attention's key bias
    (softmax ignores a per-query shift). Two correct summation orders (the
    CPU's, a device kernel's) give different noise there."""
    if name == "conv1.bias":
        return slice(None)
    if name.endswith("self_attn.in_proj_bias"):
        dim = p.shape[0] // 3
        return slice(dim, 2 * dim)
    return None


def assert_models_close(a, b, atol=1e-5, rtol=1e-4, adaptive=False):
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert pb.device.type == DEVICE, name
        pb = pb.detach().cpu()
        noise = _noise_only(name, pa) if adaptive else None
        if noise is not None:
            pa, pb = pa.detach().clone(), pb.clone()
            pa[noise] = 0
            pb[noise] = 0
        torch.testing.assert_close(pb, pa, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("kind", ["mlp", "cnn", "lm"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_training_matches_cpu(kind, opt_name):
    cpu_model, cpu_losses = train(kind, "cpu", OPTIMIZERS[opt_name])
    dev_model, dev_losses = train(kind, DEVICE, OPTIMIZERS[opt_name])
    torch.testing.assert_close(dev_losses, cpu_losses, atol=1e-5, rtol=1e-4)
    assert_models_close(cpu_model, dev_model, adaptive=opt_name.startswith("adam"))


def test_tied_weights_stay_tied():
    model = TinyLM().to(DEVICE)
    assert model.head.weight is model.emb.weight
    assert len(list(model.parameters())) == len(list(TinyLM().parameters()))


def test_clipping_and_accumulation_match_cpu():
    make_opt = OPTIMIZERS["adamw_foreach"]
    cpu_model, cpu_losses = train("lm", "cpu", make_opt, steps=3, accumulate=2, clip=0.5)
    dev_model, dev_losses = train("lm", DEVICE, make_opt, steps=3, accumulate=2, clip=0.5)
    torch.testing.assert_close(dev_losses, cpu_losses, atol=1e-5, rtol=1e-4)
    assert_models_close(cpu_model, dev_model, adaptive=True)


def test_checkpoint_save_load_resume():
    """Train 2 steps, checkpoint, train 2 more; a run resumed from the
    checkpoint (loaded to CPU, then to neuron) ends identically."""
    make_opt = OPTIMIZERS["adam_foreach"]
    model = make_model("mlp").to(DEVICE)
    opt = make_opt(model.parameters())
    data = list(batches("mlp", 4))

    def step(m, o, x, y):
        o.zero_grad()
        loss_of("mlp", m, x.to(DEVICE), y.to(DEVICE)).backward()
        o.step()

    for x, y in data[:2]:
        step(model, opt, x, y)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    for x, y in data[2:]:
        step(model, opt, x, y)

    buffer.seek(0)
    ckpt = torch.load(buffer, map_location="cpu")
    assert all(t.device.type == "cpu" for t in ckpt["model"].values())
    resumed = make_model("mlp").to(DEVICE)
    resumed.load_state_dict(ckpt["model"])
    resumed_opt = make_opt(resumed.parameters())
    resumed_opt.load_state_dict(ckpt["opt"])
    assert resumed_opt.state_dict()["state"][0]["exp_avg"].device.type == DEVICE
    for x, y in data[2:]:
        step(resumed, resumed_opt, x, y)
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=0, rtol=0)


@host_path_only
def test_training_moves_no_data_besides_loss():
    """A training step copies nothing between host and device except the
    batch going in and the loss coming out."""
    model = make_model("cnn").to(DEVICE)
    opt = OPTIMIZERS["adamw_foreach"](model.parameters())
    x, y = next(batches("cnn", 1))
    x, y = x.to(DEVICE), y.to(DEVICE)
    loss_of("cnn", model, x, y).backward()
    opt.step()
    torch.neuron.reset_transfer_stats()
    for _ in range(2):
        opt.zero_grad()
        loss_of("cnn", model, x, y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    count, nbytes = torch.neuron.total_transfers()
    assert (count, nbytes) == (0, 0), torch.neuron.transfer_stats()
