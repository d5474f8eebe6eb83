# The determinism test's control (tests/gpu/determinism_test.cc): on a problem with 32 key tiles
# adding into every query tile, the unordered (default) mode of the sm90 backward gives a dQ that
# differs bitwise from run to run, the ordered mode not; so a bitwise comparison does see an
# unordered dQ. Inputs from numpy, four `floe run --engine sm90` per mode.
#   python3 tools/dev/determinism_control.py build/tools/floe/floe
import json, os, subprocess, sys
import numpy as np

floe = sys.argv[1]
b, h, sq, skv, d = 1, 2, 1024, 4096, 128
rng = np.random.default_rng(7)
q = rng.standard_normal((b, h, sq, d), dtype=np.float32)
k = rng.standard_normal((b, h, skv, d), dtype=np.float32)
v = rng.standard_normal((b, h, skv, d), dtype=np.float32)
do = rng.standard_normal((b, h, sq, d), dtype=np.float32)
s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d)
mx = s.max(-1, keepdims=True)
p = np.exp(s - mx)
den = p.sum(-1, keepdims=True)
lse = (np.log(den) + mx)[..., 0].astype(np.float32)
o = np.einsum("bhqk,bhkd->bhqd", p / den, v).astype(np.float32)
for det in (False, True):
    c = f"/tmp/case_det{int(det)}"
    os.makedirs(c, exist_ok=True)
    json.dump({"op": "bwd", "dtype": "bf16", "b": b, "h_q": h, "h_kv": h, "s_q": sq, "s_kv": skv,
               "d_qk": d, "d_v": d, "deterministic": det}, open(f"{c}/problem.json", "w"))
    for name, a in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do), ("stats", lse)):
        np.save(f"{c}/{name}.npy", a)
    outs = []
    for run in range(4):
        r = subprocess.run([floe, "run", c, "--engine", "sm90"], capture_output=True, text=True)
        if run == 0:
            print(r.stdout.strip(), r.stderr.strip())
        if r.returncode != 0:
            print("floe run failed", r.returncode)
            break
        outs.append({n: np.load(f"{c}/out/{n}.npy") for n in ("dq", "dk", "dv")})
    for n in ("dq", "dk", "dv"):
        diffs = [int((o_[n].view(np.uint32) != outs[0][n].view(np.uint32)).sum()) for o_ in outs[1:]]
        print(f"deterministic={det} {n}: elements differing bitwise from run 0 in runs 1..3: {diffs}"
              f" of {outs[0][n].size}")
