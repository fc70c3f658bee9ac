#!/usr/bin/env python3
"""examples/mlp.cpp's training step in PyTensor, for comparison with bench_mlp's rows.

The same network (784 -> 128 tanh -> 64 relu -> 10, log-softmax cross-entropy), float32, a
minibatch of 128 rows gathered inside the function from 60000 shared rows. Installs nothing:
run `pip install pytensor` first. Prints JSON rows like bench_mlp.
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

ROWS, FEATS, H1, H2, CLASSES, BATCH, STEPS = 60000, 784, 128, 64, 10, 128, 50
pytensor.config.floatX = "float32"
rng = np.random.default_rng(2026)
protos = rng.normal(0, 0.15, (CLASSES, FEATS)).astype("float32")
labels = rng.integers(0, CLASSES, ROWS)
X = (protos[labels] + rng.normal(0, 1.5, (ROWS, FEATS))).astype("float32")
Y = np.eye(CLASSES, dtype="float32")[labels]


def init(r, c):
    return rng.normal(0, 1 / np.sqrt(r), (r, c)).astype("float32")


Xs, Ys = pytensor.shared(X, "X"), pytensor.shared(Y, "Y")
W1, W2, W3 = (pytensor.shared(init(r, c)) for r, c in ((FEATS, H1), (H1, H2), (H2, CLASSES)))
b1, b2, b3 = (pytensor.shared(np.zeros(n, "float32")) for n in (H1, H2, CLASSES))
idx = pt.ivector("batch")
xb, yb = Xs[idx], Ys[idx]
logits = pt.dot(pt.maximum(pt.dot(pt.tanh(pt.dot(xb, W1) + b1), W2) + b2, 0), W3) + b3
cost = pt.mean(-pt.sum(yb * pt.special.log_softmax(logits, axis=1), axis=1))
params = [W1, b1, W2, b2, W3, b3]
grads = pytensor.grad(cost, params)
lr = np.float32(0.1)
train = pytensor.function([idx], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)])

order = rng.permutation(ROWS).astype("int32")
batches = [order[i:i + BATCH] for i in range(0, ROWS - BATCH + 1, BATCH)]
for b in batches[:3]:
    train(b)
times, k = [], 0
for _ in range(15):
    t0 = time.perf_counter()
    for _ in range(STEPS):
        train(batches[k % len(batches)])
        k += 1
    times.append((time.perf_counter() - t0) / STEPS)
times.sort()
print(json.dumps({"benchmark": "mlp_step", "impl": "pytensor", "dtype": "float32", "size": BATCH,
                  "median_s": times[len(times) // 2], "min_s": times[0], "repeats": len(times)}))
