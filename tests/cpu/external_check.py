#!/usr/bin/env python3
"""floe checked from outside: DESIGN §2 written again in numpy (fp64), against `floe run`.

For every case folder under --cases: copy problem.json into --work, generate seeded random
float32 inputs (backward: o and stats from this file's own forward, so they are consistent),
run all cases in one `floe run --device cpu`, then compare every output element with the fp64
result computed here from the same inputs rounded to the problem's dtype.

Nothing here comes from floe: the rounding (f16 by numpy, bf16 by bit manipulation), the
mask, padding, GQA, bias broadcast, softcap, sink and the backward's formulas are all
re-derived from DESIGN §2.

Exit codes: 0 all agree, 1 a mismatch or a floe failure, 77 numpy missing (ctest SKIP).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import zlib

try:
    import numpy as np
except ImportError:
    print("external_check: numpy is not importable (run scripts/setup.sh); skipping")
    sys.exit(77)

SKIP = 77


# ----------------------------------------------------------------------------- rounding

def round_bf16(x):
    """float32 -> nearest bf16 (ties to even), returned as float32. Inputs carry no NaN."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def round_to(dtype, x):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    return x


def ulp(dtype, x):
    """One unit in the last place of `dtype` at magnitude |x| (float64 array)."""
    mant_bits, min_exp = {"f16": (10, -14), "bf16": (7, -126)}[dtype]
    ax = np.abs(x)
    _, e = np.frexp(np.where(ax > 0, ax, 1.0))  # ax = m * 2^e, m in [0.5, 1)
    e = np.maximum(e - 1, min_exp)              # floor(log2 ax), clamped to the normal range
    return np.ldexp(1.0, e - mant_bits)


# ----------------------------------------------------------------------------- the problem

class Problem:
    def __init__(self, j):
        self.j = j
        self.bwd = j["op"] == "bwd"
        self.dtype = j["dtype"]
        self.b, self.h_q, self.h_kv = j["b"], j["h_q"], j["h_kv"]
        self.s_q, self.s_kv, self.d_qk, self.d_v = j["s_q"], j["s_kv"], j["d_qk"], j["d_v"]
        self.scale = j.get("scale")
        if self.scale is None:
            self.scale = 1.0 / math.sqrt(self.d_qk)
        self.softcap = j.get("softcap")
        mask = j.get("mask") or {}
        self.bottom_right = (mask.get("align") or "top_left") == "bottom_right"
        self.left, self.right = mask.get("left"), mask.get("right")
        self.seq_len_q = j.get("seq_len_q") or [self.s_q] * self.b
        self.seq_len_kv = j.get("seq_len_kv") or [self.s_kv] * self.b
        self.bias = j.get("bias")  # [b_dim, h_dim] or None
        self.sink = bool(j.get("sink"))
        self.stats = self.bwd or bool(j.get("stats"))
        self.strides = j.get("strides") or {}
        # DESIGN 2.1, 2.2: a packed (ragged) side or a paged key side. The dense arrays of
        # the envelope [B, H, S, D] are what forward() and backward() below work on; pack()
        # and unpack() move between them and the case's own layout.
        self.ragged_q = j.get("ragged_q")
        self.ragged_kv = j.get("ragged_kv")
        self.paged = j.get("paged_kv")
        self.given_len_q = j.get("seq_len_q")
        self.given_len_kv = j.get("seq_len_kv")
        if self.ragged_q:
            self.slots_q = self.slots(self.ragged_q, self.given_len_q, self.s_q)
            self.seq_len_q = [n for _, _, n in self.slots_q]
        if self.ragged_kv:
            self.slots_kv = self.slots(self.ragged_kv, self.given_len_kv, self.s_kv)
            self.seq_len_kv = [n for _, _, n in self.slots_kv]
        if self.paged:
            self.seq_len_kv = [min(max(n, 0), self.s_kv) for n in self.given_len_kv]

    def slots(self, ragged, given, envelope):
        """(start, end, length) per batch, clamped exactly as DESIGN 2.1 says."""
        total, off = ragged["total"], ragged["offsets"]
        out = []
        for b in range(self.b):
            start = min(max(off[b], 0), total)
            end = min(max(off[b + 1], start), total)
            n = end - start
            if given is not None:
                n = min(max(given[b], 0), n)
            out.append((start, end, min(n, envelope)))
        return out

    def packed_shapes(self):
        """The shapes the case's .npy files hold (DESIGN 4)."""
        s = self.shapes()
        if self.ragged_q:
            t = self.ragged_q["total"]
            s.update(q=(t, self.h_q, self.d_qk), o=(t, self.h_q, self.d_v),
                     do=(t, self.h_q, self.d_v), stats=(t, self.h_q))
        if self.ragged_kv:
            t = self.ragged_kv["total"]
            s.update(k=(t, self.h_kv, self.d_qk), v=(t, self.h_kv, self.d_v))
        if self.paged:
            n, ps = self.paged["num_pages"], self.paged["page_size"]
            s.update(k=(n, ps, self.h_kv, self.d_qk), v=(n, ps, self.h_kv, self.d_v))
        return s

    def unpack(self, name, a):
        """A packed or paged input as the dense envelope array; rows no batch has are 0."""
        if name in ("q", "o", "do", "stats") and self.ragged_q:
            slots = self.slots_q
        elif name in ("k", "v") and self.ragged_kv:
            slots = self.slots_kv
        elif name in ("k", "v") and self.paged:
            ps, table = self.paged["page_size"], self.paged["block_table"]
            out = np.zeros((self.b, self.h_kv, self.s_kv, a.shape[3]))
            for b in range(self.b):
                for j in range(self.seq_len_kv[b]):
                    out[b, :, j] = a[table[b][j // ps], j % ps]
            return out
        else:
            return a
        envelope = self.s_q if name in ("q", "o", "do", "stats") else self.s_kv
        out = np.zeros((self.b, a.shape[1], envelope) + a.shape[2:])
        for b, (start, _, n) in enumerate(slots):
            out[b, :, :n] = np.swapaxes(a[start:start + n], 0, 1)
        return out

    def pack(self, name, a):
        """A dense output in the case's layout: rows of a slot past its length are padding
        (0, stats -inf); tokens outside every slot stay untouched (NaN here: floe poisons
        its outputs before the run)."""
        ragged = self.ragged_q if name in ("o", "stats", "dq") else (
            self.ragged_kv if name in ("dk", "dv") else None)
        if not ragged:
            return a
        slots = self.slots_q if name in ("o", "stats", "dq") else self.slots_kv
        out = np.full((ragged["total"], a.shape[1]) + a.shape[3:], np.nan)
        pad = -np.inf if name == "stats" else 0.0
        for b, (start, end, n) in enumerate(slots):
            out[start:end] = pad
            out[start:start + n] = np.swapaxes(a[b, :, :n], 0, 1)
        return out

    def shapes(self):
        s = {
            "q": (self.b, self.h_q, self.s_q, self.d_qk),
            "k": (self.b, self.h_kv, self.s_kv, self.d_qk),
            "v": (self.b, self.h_kv, self.s_kv, self.d_v),
            "o": (self.b, self.h_q, self.s_q, self.d_v),
            "do": (self.b, self.h_q, self.s_q, self.d_v),
            "stats": (self.b, self.h_q, self.s_q),
        }
        if self.bias:
            s["bias"] = (self.bias[0], self.bias[1], self.s_q, self.s_kv)
        if self.sink:
            s["sink"] = (self.h_q,)
        return s

    def visible(self, sq, skv):
        """[sq, skv] booleans: the band of DESIGN §2 for one batch's actual lengths."""
        off = skv - sq if self.bottom_right else 0
        i = np.arange(sq)[:, None]
        j = np.arange(skv)[None, :]
        vis = np.ones((sq, skv), dtype=bool)
        if self.left is not None:
            vis &= j >= i + off - self.left
        if self.right is not None:
            vis &= j <= i + off + self.right
        return vis

    def bias_of(self, bias, b, h, sq, skv):
        if bias is None:
            return 0.0
        return bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0, :sq, :skv]

    def scores(self, q, k, bias, b, h, sq, skv):
        """Pre-mask scores in fp64 and tanh(x / c) (for the softcap's derivative)."""
        kh = h // (self.h_q // self.h_kv)
        x = self.scale * (q[b, h, :sq] @ k[b, kh, :skv].T)
        t = None
        if self.softcap is not None:
            t = np.tanh(x / self.softcap)
            x = self.softcap * t
        return x + self.bias_of(bias, b, h, sq, skv), t


def forward(p, x):
    """O and LSE in fp64 from the (rounded) inputs."""
    q, k, v = x["q"], x["k"], x["v"]
    bias, sink = x.get("bias"), x.get("sink")
    o = np.zeros(p.shapes()["o"])
    lse = np.full(p.shapes()["stats"], -np.inf)
    group = p.h_q // p.h_kv
    for b in range(p.b):
        sq, skv = p.seq_len_q[b], p.seq_len_kv[b]
        vis = p.visible(sq, skv)
        for h in range(p.h_q):
            s, _ = p.scores(q, k, bias, b, h, sq, skv)
            s = np.where(vis, s, -np.inf)
            cols = [s]
            if sink is not None:
                cols.append(np.full((sq, 1), sink[h]))
            s_all = np.concatenate(cols, axis=1)
            m = s_all.max(axis=1, initial=-np.inf)  # -inf: no visible key and no sink
            finite = np.isfinite(m)
            msafe = np.where(finite, m, 0.0)
            with np.errstate(divide="ignore"):  # log(0) never taken: masked by `finite`
                total = np.exp(s_all - msafe[:, None]).sum(axis=1)
                row_lse = np.where(finite, np.log(np.where(finite, total, 1.0)) + msafe, -np.inf)
            pm = np.where(vis, np.exp(s - np.where(finite, row_lse, 0.0)[:, None]), 0.0)
            o[b, h, :sq] = pm @ v[b, h // group, :skv]
            lse[b, h, :sq] = row_lse
    return o, lse


def backward(p, x):
    """dq dk dv [dbias] [dsink] in fp64, from the given O and stats (as floe reads them)."""
    q, k, v, o, do, lse = x["q"], x["k"], x["v"], x["o"], x["do"], x["stats"]
    bias, sink = x.get("bias"), x.get("sink")
    group = p.h_q // p.h_kv
    g = {"dq": np.zeros(q.shape), "dk": np.zeros(k.shape), "dv": np.zeros(v.shape)}
    if bias is not None:
        g["dbias"] = np.zeros(bias.shape)
    if sink is not None:
        g["dsink"] = np.zeros(sink.shape)
    for b in range(p.b):
        sq, skv = p.seq_len_q[b], p.seq_len_kv[b]
        vis = p.visible(sq, skv)
        for h in range(p.h_q):
            kh = h // group
            s, t = p.scores(q, k, bias, b, h, sq, skv)
            row_lse = lse[b, h, :sq]
            safe = np.where(np.isfinite(row_lse), row_lse, 0.0)
            pm = np.where(vis & np.isfinite(row_lse)[:, None], np.exp(s - safe[:, None]), 0.0)
            dout = do[b, h, :sq]
            delta = (dout * o[b, h, :sq]).sum(axis=1)
            g["dv"][b, kh, :skv] += pm.T @ dout
            dp = dout @ v[b, kh, :skv].T
            ds = pm * (dp - delta[:, None])  # d loss / d (capped score + bias)
            if bias is not None:
                bb = b if bias.shape[0] > 1 else 0
                bh = h if bias.shape[1] > 1 else 0
                g["dbias"][bb, bh, :sq, :skv] += ds
            if t is not None:
                ds = ds * (1.0 - t * t)  # through c * tanh(x / c)
            g["dq"][b, h, :sq] = p.scale * (ds @ k[b, kh, :skv])
            g["dk"][b, kh, :skv] += p.scale * (ds.T @ q[b, h, :sq])
            if sink is not None:
                terms = -np.exp(sink[h] - row_lse) * delta
                g["dsink"][h] += terms.sum()
                g.setdefault("_dsink_scale", np.zeros(sink.shape))[h] += np.abs(terms).sum()
    return g


# ----------------------------------------------------------------------------- inputs

def make_inputs(p, name):
    """Seeded random logical inputs (float32), and the rounded copies floe will see."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    raw = {}
    for n, shape in p.packed_shapes().items():
        if n in ("o", "stats") or (n == "do" and not p.bwd):
            continue
        # A zero stride makes several indices share one element: their values must agree.
        gen_shape = list(shape)
        for i, st in enumerate(p.strides.get(n) or []):
            if st == 0:
                gen_shape[i] = 1
        a = rng.standard_normal(gen_shape).astype(np.float32)
        if n == "bias":
            a *= 2.0
        raw[n] = np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.float32)
    seen = {n: p.unpack(n, round_to(p.dtype, a).astype(np.float64))
            for n, a in raw.items() if n != "sink"}
    if "sink" in raw:
        seen["sink"] = raw["sink"].astype(np.float64)  # f32, no rounding
    if p.bwd:
        o, lse = forward(p, seen)
        # Packed: tokens outside every slot get a value (never read) instead of NaN.
        raw["o"] = np.nan_to_num(p.pack("o", o), nan=0.25).astype(np.float32)
        raw["stats"] = np.nan_to_num(p.pack("stats", lse), nan=0.25, neginf=-np.inf,
                                     posinf=np.inf).astype(np.float32)
        seen["o"] = p.unpack("o", round_to(p.dtype, raw["o"]).astype(np.float64))
        seen["stats"] = p.unpack("stats", raw["stats"].astype(np.float64))
    return raw, seen


# ----------------------------------------------------------------------------- comparison

def compare(p, name, out, expected, extra):
    """Messages for every output that disagrees; empty when all agree."""
    problems = []
    for n, want in expected.items():
        if n.startswith("_"):
            continue
        path = os.path.join(out, n + ".npy")
        if not os.path.exists(path):
            problems.append(f"{name}: {n}.npy missing from out/")
            continue
        got = np.load(path).astype(np.float64)
        if got.shape != want.shape:
            problems.append(f"{name}: {n} shape {got.shape}, expected {want.shape}")
            continue
        if n in ("stats", "dsink"):
            # f32 outputs: floe computes in fp64 and rounds once to f32 (half an f32 ulp,
            # 6e-8 relative); the two fp64 computations differ by summation order only,
            # ~1e-16 of the terms' magnitude. 1e-6 relative leaves a wide margin over both
            # while still catching any real error (a wrong term is off by far more). dsink is
            # a signed sum that may cancel, so its bound also scales with sum(|terms|).
            scale = np.abs(want)
            if n == "dsink":
                scale = np.maximum(scale, extra["_dsink_scale"])
            tol = 1e-6 * scale + 1e-30
        else:
            # One ulp of the output dtype at the larger magnitude: floe rounds its fp64
            # result once (<= half an ulp from the exact value), and this fp64 result is
            # within ~1e-15 relative of it, so a correct output is within one ulp.
            tol = ulp(p.dtype, np.maximum(np.abs(want), np.abs(got)))
        # NaN expected: a token outside every slot, which floe must leave poisoned.
        same_inf = (np.isinf(want) & (got == want)) | (np.isnan(want) & np.isnan(got))
        with np.errstate(invalid="ignore"):  # inf - inf where both are -inf: handled above
            bad = ~same_inf & ~(np.abs(got - want) <= tol)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(
                f"{name}: {n}: {int(bad.sum())} of {bad.size} elements off; first {list(idx)}: "
                f"floe {got[idx]!r}, expected {want[idx]!r} (tolerance {tol[idx]:.3g})")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floe", required=True, help="the floe binary")
    ap.add_argument("--cases", required=True, help="folder of case folders (problem.json)")
    ap.add_argument("--work", required=True, help="scratch folder; cases are copied here")
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    args = ap.parse_args()

    names = sorted(d for d in os.listdir(args.cases)
                   if os.path.isfile(os.path.join(args.cases, d, "problem.json")))
    if args.only:
        names = [n for n in names if n in args.only]
    if not names:
        print("external_check: no cases found", file=sys.stderr)
        return 1
    shutil.rmtree(args.work, ignore_errors=True)
    expected = {}
    problems = {}
    dirs = []
    for name in names:
        with open(os.path.join(args.cases, name, "problem.json")) as f:
            j = json.load(f)
        p = Problem(j)
        problems[name] = p
        d = os.path.join(args.work, name)
        os.makedirs(d)
        shutil.copy(os.path.join(args.cases, name, "problem.json"), d)
        raw, seen = make_inputs(p, name)
        for n, a in raw.items():
            np.save(os.path.join(d, n + ".npy"), a)
        if p.bwd:
            expected[name] = {n: (p.pack(n, a) if not n.startswith("_") else a)
                              for n, a in backward(p, seen).items()}
        else:
            o, lse = forward(p, seen)
            expected[name] = {"o": p.pack("o", o)}
            if p.stats:
                expected[name]["stats"] = p.pack("stats", lse)
        dirs.append(d)

    run = subprocess.run([args.floe, "run", "--device", "cpu"] + dirs, capture_output=True,
                         text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        print(f"external_check: floe run exited {run.returncode}", file=sys.stderr)
        return 1

    failures = []
    for name, d in zip(names, dirs):
        exp = expected[name]
        failures += compare(problems[name], name, os.path.join(d, "out"), exp, exp)
    for msg in failures:
        print("MISMATCH " + msg, file=sys.stderr)
    if failures:
        print(f"external_check: reproduce with: {args.floe} run --device cpu CASE "
              f"(case folders under {args.work})", file=sys.stderr)
        return 1
    print(f"external_check: {len(names)} cases agree with numpy fp64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
