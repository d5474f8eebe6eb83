"""fp64 attention with every floe feature (DESIGN §2), written with torch ops so that autograd
gives the reference gradients. Checked against torch's math SDPA where SDPA has the feature."""

import math

import torch


def visible(b, s_q, s_kv, align, left, right, seq_len_q=None, seq_len_kv=None, device="cpu"):
    """[B, 1, Sq, Skv] bool: key j visible to query i in batch b (band and key padding)."""
    sq = torch.full((b,), s_q, dtype=torch.int64) if seq_len_q is None else seq_len_q.long().cpu()
    skv = (torch.full((b,), s_kv, dtype=torch.int64) if seq_len_kv is None
           else seq_len_kv.long().cpu())
    off = (skv - sq) if align == "bottom_right" else torch.zeros(b, dtype=torch.int64)
    i = torch.arange(s_q).view(1, s_q, 1)
    j = torch.arange(s_kv).view(1, 1, s_kv)
    o = off.view(b, 1, 1)
    vis = (j < skv.view(b, 1, 1)).expand(b, s_q, s_kv)
    if left is not None:
        vis = vis & (j >= i + o - left)
    if right is not None:
        vis = vis & (j <= i + o + right)
    return vis.unsqueeze(1).to(device)


def attention(q, k, v, *, align="top_left", left=None, right=None, bias=None, sink=None,
              softcap=None, scale=None, seq_len_q=None, seq_len_kv=None):
    """Returns (o, lse) in float64. Inputs may require grad (any dtype: computed in fp64)."""
    q, k, v = q.double(), k.double(), v.double()
    b, h_q, s_q, d = q.shape
    h_kv, s_kv = k.shape[1], k.shape[2]
    g = h_q // h_kv
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = scale * (q @ k.transpose(-1, -2))
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.double()
    vis = visible(b, s_q, s_kv, align, left, right, seq_len_q, seq_len_kv, q.device)
    s = s.masked_fill(~vis, -math.inf)
    if sink is not None:
        col = sink.double().view(1, h_q, 1, 1).expand(b, h_q, s_q, 1)
        lse = torch.logsumexp(torch.cat([s, col], dim=-1), dim=-1)
    else:
        lse = torch.logsumexp(s, dim=-1)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    p = torch.exp(s - safe.unsqueeze(-1))
    o = p @ v
    if seq_len_q is not None:
        rows = (torch.arange(s_q, device=q.device).view(1, 1, s_q) <
                seq_len_q.to(q.device).long().view(b, 1, 1))
        o = torch.where(rows.unsqueeze(-1), o, torch.zeros_like(o))
        lse = torch.where(rows, lse, torch.full_like(lse, -math.inf))
    return o, lse
