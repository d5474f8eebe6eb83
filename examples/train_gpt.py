#!/usr/bin/env python3
"""A small GPT trained twice from the same seed: once with floe.attention, once with PyTorch's
scaled_dot_product_attention. Writes both loss curves (JSON and PNG) and the time per step.

    python3 examples/train_gpt.py --out results/gpt [--steps 300] [--head-dim 64|128]

The text is generated (no download): sums written out as "417+82=499;" in random order,
character-level, so that the loss keeps falling for a few hundred steps and the two curves
can be compared point by point (they agree within bf16 noise; they are not bitwise equal,
since the kernels round differently).
"""

import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import floe


def make_text(n_chars, seed):
    rng = random.Random(seed)
    parts, total = [], 0
    while total < n_chars:
        a, b = rng.randrange(1000), rng.randrange(1000)
        s = f"{a}+{b}={a + b};"
        parts.append(s)
        total += len(s)
    return "".join(parts)


class Block(nn.Module):
    def __init__(self, d_model, n_head, attn):
        super().__init__()
        self.n_head, self.attn = n_head, attn
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        b, s, d = x.shape
        h = self.n_head
        # [B, S, 3, H, D] viewed as three [B, H, S, D] tensors: no copies for floe.
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, h, d // h).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.attn == "floe":
            o = floe.attention(q, k, v, causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d_model, n_head, n_layer, seq, attn):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, attn) for _ in range(n_layer))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def train(attn, args, data, vocab):
    torch.manual_seed(args.seed)
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    n_head = args.d_model // args.head_dim
    model = GPT(vocab, args.d_model, n_head, args.layers, args.seq, attn).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    gen = torch.Generator().manual_seed(args.seed)
    losses, times = [], []
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=gen)
        idx = torch.stack([data[s:s + args.seq + 1] for s in starts]).to(dev)
        lr = args.lr * min(1.0, (step + 1) / 20)
        for g in opt.param_groups:
            g["lr"] = lr
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if step % 50 == 0 or step == args.steps - 1:
            print(f"{attn:5s} step {step:4d} loss {losses[-1]:.4f} {1e3 * times[-1]:.2f} ms")
    warm = times[10:] or times
    return {"losses": losses, "ms_per_step": 1e3 * sorted(warm)[len(warm) // 2],
            "step_ms": [1e3 * t for t in times]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/train_gpt")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--head-dim", type=int, default=64, choices=[64, 128])
    ap.add_argument("--d-model", type=int, default=512, help="heads = d_model / head_dim")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="cuda; cpu only for a smoke test (slow)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("train_gpt: needs a CUDA GPU (--device cpu for a smoke test)")
    os.makedirs(args.out, exist_ok=True)
    text = make_text(2_000_000, args.seed)
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    runs = {attn: train(attn, args, data, len(chars)) for attn in ("floe", "sdpa")}
    a, b = runs["floe"]["losses"], runs["sdpa"]["losses"]
    tail = slice(len(a) // 2, None)
    gap = max(abs(x - y) for x, y in zip(a[tail], b[tail]))
    summary = {
        "args": vars(args),
        "ms_per_step": {k: v["ms_per_step"] for k, v in runs.items()},
        "final_loss": {k: v["losses"][-1] for k, v in runs.items()},
        "max_abs_loss_gap_second_half": gap,
        "losses": {k: v["losses"] for k, v in runs.items()},
        "step_ms": {k: v["step_ms"] for k, v in runs.items()},
    }
    with open(os.path.join(args.out, "train_gpt.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: summary[k] for k in ("ms_per_step", "final_loss",
                                              "max_abs_loss_gap_second_half")}, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train_gpt: no matplotlib, no PNG")
        return
    fig, (ax, ax_t) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                   gridspec_kw={"height_ratios": [2, 1]})
    for k, v in runs.items():
        ax.plot(v["losses"], label=f"{k} ({v['ms_per_step']:.2f} ms/step, median)", lw=1)
        ax_t.plot(v["step_ms"], label=k, lw=1)
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.set_title(f"GPT {args.layers}x{args.d_model}, head dim {args.head_dim}, causal, bf16")
    ax.legend()
    # The first steps (allocator, autotuning, lazy initialisation) are off the scale.
    warm = [t for v in runs.values() for t in v["step_ms"][10:] or v["step_ms"]]
    ax_t.set_ylim(0, 1.5 * max(warm))
    ax_t.set_xlabel("step")
    ax_t.set_ylabel("time per step (ms)")
    ax_t.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "train_gpt.png"), dpi=120)
    print(f"train_gpt: {args.out}/train_gpt.png")


if __name__ == "__main__":
    main()
