"""Models built from `transformers` configs with random weights (no
downloads: HF_HUB_OFFLINE=1, never from_pretrained), dropout off so every
configuration computes the same thing:

- BERT-style encoder, forward and backward (sequences/s);
- GPT-2-style decoder generating tokens greedily with a static KV cache
  (tokens/s); compiled configurations compile `model.forward`, the recipe
  transformers documents for compiled generation;
- Llama-style decoder, one AdamW training step (tokens/s);
- ResNet-style CNN, one SGD training step (images/s);
- ViT-style encoder (patch embedding + pre-norm blocks), forward and
  backward (images/s).

transformers treats device type "neuron" as AWS Neuron: `generate` with a
static cache would compile the forward itself with backend "neuron"
(generation_config.disable_compile=True stops that; we compile explicitly)."""
import functools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
    ResNetConfig, ResNetForImageClassification, ViTConfig, ViTModel,
)
from transformers.utils import logging as hf_logging  # noqa: E402

from benchmarks.harness import MODEL_TIMED_STEPS, Instance, Workload  # noqa: E402

hf_logging.set_verbosity_error()


def _ints(high, *shape, seed=1):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def _build_bert(p, device, compile):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=p["vocab"], hidden_size=p["hidden"], num_hidden_layers=p["layers"],
                     num_attention_heads=p["heads"], intermediate_size=4 * p["hidden"],
                     max_position_embeddings=p["seq"], hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    model = BertModel(cfg, add_pooling_layer=False).to(device)
    fwd = compile(model)
    ids = _ints(p["vocab"], p["batch"], p["seq"]).to(device)
    mask = torch.ones_like(ids)
    probe = model.encoder.layer[0].attention.self.query.weight

    def step():
        model.zero_grad(set_to_none=True)
        loss = fwd(input_ids=ids, attention_mask=mask).last_hidden_state.square().mean()
        loss.backward()
        return loss.detach(), probe.grad

    return Instance(step, work=p["batch"])


def _build_gpt2(p, device, compile):
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=p["vocab"], n_positions=p["prompt"] + p["new"], n_embd=p["hidden"],
                     n_layer=p["layers"], n_head=p["heads"], resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = GPT2LMHeadModel(cfg).to(device).eval()
    model.generation_config.disable_compile = True  # no auto-compile (see module docstring)
    model.forward = compile(model.forward)
    ids = _ints(p["vocab"], p["batch"], p["prompt"]).to(device)
    mask = torch.ones_like(ids)

    def step():
        with torch.no_grad():
            return model.generate(ids, attention_mask=mask, max_new_tokens=p["new"], min_new_tokens=p["new"],
                                  do_sample=False, cache_implementation="static", pad_token_id=0)

    return Instance(step, work=p["batch"] * p["new"])


def _build_llama(p, device, compile):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=p["ffn"],
                      num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
                      num_key_value_heads=p["kv_heads"], max_position_embeddings=p["seq"])
    model = LlamaForCausalLM(cfg).to(device)
    fwd = compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # default implementation per device
    ids = _ints(p["vocab"], p["batch"], p["seq"]).to(device)

    def step():
        loss = fwd(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return Instance(step, work=p["batch"] * p["seq"])


def _build_resnet(p, device, compile):
    torch.manual_seed(0)
    cfg = ResNetConfig(embedding_size=p["widths"][0], hidden_sizes=p["widths"], depths=p["depths"],
                       layer_type="basic", num_labels=10)
    model = ResNetForImageClassification(cfg).to(device)
    fwd = compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(p["batch"], 3, p["size"], p["size"], generator=g).to(device)
    y = torch.randint(0, 10, (p["batch"],), generator=g).to(device)

    def step():
        loss = fwd(pixel_values=x, labels=y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return Instance(step, work=p["batch"])


def _build_vit(p, device, compile):
    torch.manual_seed(0)
    cfg = ViTConfig(image_size=p["size"], patch_size=p["patch"], hidden_size=p["hidden"],
                    num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
                    intermediate_size=4 * p["hidden"], hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
    model = ViTModel(cfg, add_pooling_layer=False).to(device)
    fwd = compile(model)
    x = torch.randn(p["batch"], 3, p["size"], p["size"], generator=torch.Generator().manual_seed(1)).to(device)
    probe = model.embeddings.patch_embeddings.projection.weight

    def step():
        model.zero_grad(set_to_none=True)
        loss = fwd(pixel_values=x).last_hidden_state.square().mean()
        loss.backward()
        return loss.detach(), probe.grad

    return Instance(step, work=p["batch"])


def workloads(quick):
    if quick:
        bert = dict(vocab=1000, hidden=64, layers=2, heads=2, batch=2, seq=32)
        gpt2 = dict(vocab=1000, hidden=64, layers=2, heads=2, batch=1, prompt=8, new=8)
        llama = dict(vocab=1000, hidden=64, ffn=172, layers=2, heads=4, kv_heads=2, batch=2, seq=32)
        resnet = dict(widths=[8, 16, 32, 64], depths=[1, 1, 1, 1], batch=4, size=32)
        vit = dict(size=32, patch=8, hidden=64, layers=2, heads=2, batch=2)
    else:
        bert = dict(vocab=8000, hidden=256, layers=4, heads=4, batch=8, seq=128)
        gpt2 = dict(vocab=8000, hidden=256, layers=4, heads=4, batch=2, prompt=32, new=64)
        llama = dict(vocab=8000, hidden=256, ffn=688, layers=4, heads=8, kv_heads=4, batch=4, seq=128)
        resnet = dict(widths=[32, 64, 128, 256], depths=[1, 1, 1, 1], batch=16, size=64)
        vit = dict(size=64, patch=8, hidden=256, layers=4, heads=4, batch=16)
    train_tol = (1e-3, 1e-4)
    return [
        Workload(name="bert_fwd_bwd", group="models", min_timed_steps=MODEL_TIMED_STEPS,
                 title=f"BERT encoder fwd+bwd, {bert['layers']}x{bert['hidden']}, batch {bert['batch']}x{bert['seq']}",
                 unit="seq/s", build=functools.partial(_build_bert, bert), params=bert,
                 tol_compiled=train_tol),
        Workload(name="gpt2_generate", group="models", min_timed_steps=MODEL_TIMED_STEPS,
                 title=f"GPT-2 greedy generation, {gpt2['layers']}x{gpt2['hidden']}, "
                       f"batch {gpt2['batch']}, {gpt2['prompt']}+{gpt2['new']} tokens",
                 unit="tokens/s", build=functools.partial(_build_gpt2, gpt2), params=gpt2),
        Workload(name="llama_train", group="models", min_timed_steps=MODEL_TIMED_STEPS,
                 title=f"Llama train step (AdamW), {llama['layers']}x{llama['hidden']}, "
                       f"batch {llama['batch']}x{llama['seq']}",
                 unit="tokens/s", build=functools.partial(_build_llama, llama), params=llama,
                 tol_compiled=train_tol),
        Workload(name="resnet_train", group="models", min_timed_steps=MODEL_TIMED_STEPS,
                 title=f"ResNet train step (SGD), widths {resnet['widths']}, "
                       f"batch {resnet['batch']}x3x{resnet['size']}x{resnet['size']}",
                 unit="images/s", build=functools.partial(_build_resnet, resnet), params=resnet,
                 tol_compiled=train_tol),
        Workload(name="vit_fwd_bwd", group="models", min_timed_steps=MODEL_TIMED_STEPS,
                 title=f"ViT encoder fwd+bwd, {vit['layers']}x{vit['hidden']}, "
                       f"batch {vit['batch']}x3x{vit['size']}x{vit['size']}, patch {vit['patch']}",
                 unit="images/s", build=functools.partial(_build_vit, vit), params=vit,
                 tol_compiled=train_tol),
    ]
