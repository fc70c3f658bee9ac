#!/usr/bin/env python3
"""examples/benchmark_logistic_regression: its Google Benchmark JSON carries xsym's counters by op
and by class, and they agree with the xsym profile of the same run (XSYM_BENCH_PROFILE). (With
profiling compiled out report() adds none: tests/noprof/test_noprof.cpp checks that.)

    check_benchmark.py <example> <work dir>
"""

import json
import math
import os
import subprocess
import sys
from collections import defaultdict

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(binary, work, tag):
    out = os.path.join(work, f"{tag}.json")
    env = dict(os.environ, XSYM_BENCH_PROFILE=os.path.join(work, f"{tag}.profile.{{dtype}}.json"))
    env.pop("XSYM_FLAGS", None)
    proc = subprocess.run([binary, "--benchmark_min_time=0.05", f"--benchmark_out={out}",
                           "--benchmark_out_format=json"], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"{binary} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    with open(out) as f:
        return json.load(f), proc.stdout


def close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-15)


def main():
    example, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    doc, console = run(example, work, "profiled")
    benches = {b["name"]: b for b in doc["benchmarks"]}
    check(set(benches) == {"logreg_step/float32", "logreg_step/float64"}, f"benchmarks: {sorted(benches)}")
    check(any(f"class:xsym::{c}:{k}" in console for c in ("Gemv", "OnePassGemv") for k in ("time", "share%")),
          "the console output shows the counters")
    for name, b in benches.items():
        dtype = name.split("/")[1]
        with open(os.path.join(work, f"profiled.profile.{dtype}.json")) as f:
            prof = json.load(f)
        iters = b["iterations"]
        calls = {f["name"]: f["calls"] for f in prof["functions"]}
        check(calls.get("train") == iters, f"{name}: train called {calls.get('train')} times in {iters} iterations")
        for kind, section in (("op", "ops"), ("class", "classes")):
            rows = prof[section]
            total = sum(r["time_s"] for r in rows)
            check(len(rows) >= (2 if kind == "class" else 4), f"{name}: {len(rows)} {section}")
            # Every class; the 3 ops that took the most time (the example's counters{.top_ops = 3}).
            shown = rows if kind == "class" else sorted(rows, key=lambda r: -r["time_s"])[:3]
            counted = {k[len(kind) + 1:k.rindex(":")] for k in b if k.startswith(kind + ":")}
            check(counted == {r["name"] for r in shown}, f"{name}: {kind} counters for {sorted(counted)}")
            for r in shown:
                key = f"{kind}:{r['name']}:"
                check(key + "time" in b, f"{name}: no counter {key}time")
                check(key + "share%" in b, f"{name}: no counter {key}share%")
                if key + "time" not in b:
                    continue
                # kAvgIterations: the counter is the group's seconds over the iterations.
                check(close(b[key + "time"], r["time_s"] / iters), f"{name}: {key}time {b[key + 'time']} vs "
                      f"{r['time_s']} / {iters}")
                check(close(b[key + "share%"], 100 * r["time_s"] / total), f"{name}: {key}share%")
        # Bandwidth where the profile counts bytes: the products (one_pass_gemv makes them one
        # OnePassGemv node) read the whole matrix.
        gemv = [k for k in b if k.startswith(("class:xsym::Gemv:GB/s", "class:xsym::OnePassGemv:GB/s"))]
        check(len(gemv) == 1 and b[gemv[0]] > 0.1, f"{name}: the products' GB/s counter: {gemv}")
        nodes = defaultdict(float)
        for f in prof["functions"]:
            for n in f["nodes"]:
                nodes[n["op"]] += n["bytes"] * n["calls"]
        for op, bytes_ in nodes.items():
            key = f"op:{op}:GB/s"
            t = next(r["time_s"] for r in prof["ops"] if r["name"] == op)
            if bytes_ > 0 and t > 0 and f"op:{op}:time" in b:
                check(key in b and close(b[key], bytes_ / t / 1e9, 1e-5), f"{name}: {key}")

    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("counters by op and class agree with the profile")


if __name__ == "__main__":
    main()
