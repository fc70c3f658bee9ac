#!/usr/bin/env python3
"""The seeds' logistic regression in PyTorch on a CUDA GPU, for comparison with
examples/logistic_regression built for CUDA (`make cuda`, then `XSYM_FLAGS=device=cuda`).

As in the seeds and in xsym's example, X and y come from host memory at every step and the
two outputs (prediction, cross-entropy) go back to the host. A second row keeps X and y on
the device. Installs nothing; needs torch with CUDA. Prints JSON rows like bench_xsym.
"""
import json
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"PyTorch not available ({e})")
if not torch.cuda.is_available():
    sys.exit("PyTorch sees no CUDA device")

N, FEATS, STEPS = 400, 784, 2000
dev = torch.device("cuda")
for dtype in ("float32", "float64"):
    tdtype = getattr(torch, dtype)
    rng = np.random.default_rng(42)
    X = rng.standard_normal((N, FEATS)).astype(dtype)
    Y = rng.integers(0, 2, N).astype(dtype)
    w = torch.tensor(rng.standard_normal(FEATS).astype(dtype), device=dev, requires_grad=True)
    b = torch.zeros((), dtype=tdtype, device=dev, requires_grad=True)

    def step(x, y):
        p_1 = 1 / (1 + torch.exp(-(x @ w) - b))
        xent = -y * torch.log(p_1) - (1 - y) * torch.log(1 - p_1)
        cost = xent.mean() + 0.01 * (w ** 2).sum()
        gw, gb = torch.autograd.grad(cost, [w, b])
        with torch.no_grad():
            w.sub_(0.01 * gw)
            b.sub_(0.01 * gb)
        return p_1 > 0.5, xent

    def from_host():
        pred, xent = step(torch.from_numpy(X).to(dev), torch.from_numpy(Y).to(dev))
        return pred.cpu(), xent.detach().cpu()

    Xd, Yd = torch.from_numpy(X).to(dev), torch.from_numpy(Y).to(dev)

    def resident():
        pred, xent = step(Xd, Yd)
        return pred.cpu(), xent.detach().cpu()

    for impl, fn in (("pytorch_cuda", from_host), ("pytorch_cuda_resident", resident)):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(STEPS):
                fn()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / STEPS)
        times.sort()
        print(json.dumps({"benchmark": "logreg", "impl": impl, "dtype": dtype, "size": STEPS,
                          "median_s": times[1], "min_s": times[0], "repeats": 3,
                          "torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
