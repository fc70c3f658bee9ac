#!/usr/bin/env python3
"""The seeds' logistic regression in PyTensor, for comparison with bench_xsym's logreg rows.

Installs nothing: run `pip install pytensor` first. Prints JSON rows like bench_xsym.
"""
import json
import sys
import time

try:
    import numpy as np
    import pytensor
    import pytensor.tensor as pt
except ImportError as e:  # the harness reports this line
    sys.exit(f"PyTensor not available ({e}); pip install pytensor to compare")

N, FEATS, STEPS = 400, 784, 2000
for dtype in ("float32", "float64"):
    pytensor.config.floatX = dtype
    rng = np.random.default_rng(42)
    X = rng.standard_normal((N, FEATS)).astype(dtype)
    Y = rng.integers(0, 2, N).astype(dtype)
    x, y = pt.matrix("x"), pt.vector("y")
    w = pytensor.shared(rng.standard_normal(FEATS).astype(dtype), name="w")
    b = pytensor.shared(np.asarray(0.0, dtype=dtype), name="b")
    p_1 = 1 / (1 + pt.exp(-pt.dot(x, w) - b))
    xent = -y * pt.log(p_1) - (1 - y) * pt.log(1 - p_1)
    cost = pt.cast(xent.mean(), dtype) + 0.01 * (w ** 2).sum()
    gw, gb = pytensor.grad(cost, [w, b])
    train = pytensor.function([x, y], [p_1 > 0.5, xent], updates=[(w, w - 0.01 * gw), (b, b - 0.01 * gb)])
    train(X, Y)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            train(X, Y)
        times.append((time.perf_counter() - t0) / STEPS)
    times.sort()
    print(json.dumps({"benchmark": "logreg", "impl": "pytensor", "dtype": dtype, "size": STEPS,
                      "median_s": times[1], "min_s": times[0], "repeats": 3}))
