#!/usr/bin/env python3
"""scripts/xsym-prof diff on hand-made profiles: the op made twice as slow comes first in every
section; with repetitions, a change inside the spread is marked noise and a real one is not;
files it cannot compare are refused with a message that names them.

    check_prof_diff.py <scripts/xsym-prof> <work dir>
"""

import json
import os
import subprocess
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def profile(times):
    """An xsym JSON export of one function called 10 times, one node per op."""
    nodes = []
    for i, (op, cls, t) in enumerate(times):
        nodes.append({"id": i, "op": op, "class": cls, "apply": f"{op}(x)", "time_s": t, "calls": 10, "bytes": 0})
    return {"functions": [{"name": "train", "calls": 10, "nodes": nodes}]}


def benchmark(reps):
    """A Google Benchmark file: one benchmark, one entry per repetition, xsym's counters."""
    out = []
    for r, values in enumerate(reps):
        b = {"name": "step", "run_name": "step", "run_type": "iteration", "repetition_index": r, "iterations": 100}
        for op, t in values.items():
            b[f"op:{op}:time"] = t
            b[f"op:{op}:share%"] = 50.0
        out.append(b)
    out.append({"name": "step_mean", "run_name": "step", "run_type": "aggregate", "aggregate_name": "mean",
                "op:Gemv{no_inplace}:time": 99.0})  # aggregates are not read
    return {"context": {}, "benchmarks": out}


def diff(tool, a, b):
    proc = subprocess.run([sys.executable, tool, "diff", a, b], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def first_row(text, section):
    lines = text.splitlines()
    i = lines.index(section)
    return lines[i + 3]  # title, underline, header


def write(work, name, doc):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def main():
    tool, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    a = write(work, "a.json", profile([("Gemv{no_inplace}", "xsym::Gemv", 1.0), ("Elemwise{exp}", "xsym::Elemwise", 0.5),
                                       ("Elemwise{add}", "xsym::Elemwise", 0.2)]))
    b = write(work, "b.json", profile([("Gemv{no_inplace}", "xsym::Gemv", 1.05), ("Elemwise{exp}", "xsym::Elemwise", 1.0),
                                       ("Elemwise{add}", "xsym::Elemwise", 0.21)]))
    rc, out, err = diff(tool, a, b)
    check(rc == 0, f"diff failed: {err}")
    if rc == 0:
        check("Elemwise{exp}" in first_row(out, "Ops") and " 2.00 " in first_row(out, "Ops"),
              f"Ops: {first_row(out, 'Ops')}")
        check("xsym::Elemwise" in first_row(out, "Classes"), f"Classes: {first_row(out, 'Classes')}")
        check("Elemwise{exp}(x)" in first_row(out, "Apply"), f"Apply: {first_row(out, 'Apply')}")
        # Per call: 0.5 s over 10 calls.
        check("5.000e-02s  1.000e-01s" in first_row(out, "Ops"), f"times per call: {first_row(out, 'Ops')}")
        check("noise" not in out, "no repetitions, so nothing is called noise")

    ra = write(work, "ra.json", benchmark([{"Gemv{no_inplace}": 1.00e-5, "Elemwise{exp}": 2.0e-6},
                                          {"Gemv{no_inplace}": 1.10e-5, "Elemwise{exp}": 2.1e-6},
                                          {"Gemv{no_inplace}": 0.95e-5, "Elemwise{exp}": 1.9e-6}]))
    rb = write(work, "rb.json", benchmark([{"Gemv{no_inplace}": 1.04e-5, "Elemwise{exp}": 4.0e-6},
                                          {"Gemv{no_inplace}": 1.02e-5, "Elemwise{exp}": 4.1e-6},
                                          {"Gemv{no_inplace}": 1.06e-5, "Elemwise{exp}": 3.9e-6}]))
    rc, out, err = diff(tool, ra, rb)
    check(rc == 0, f"diff of benchmark files failed: {err}")
    if rc == 0:
        row = first_row(out, "Ops")
        check("Elemwise{exp}" in row and "noise" not in row, f"the doubled op first, not noise: {row}")
        gemv = [l for l in out.splitlines() if "Gemv{no_inplace}" in l]
        check(len(gemv) == 1 and gemv[0].endswith("noise"), f"Gemv's change is inside its spread: {gemv}")
        check("9.900e+01" not in out, "aggregates are not read as repetitions")

    plain = write(work, "plain.json", {"context": {}, "benchmarks": [{"name": "step", "run_name": "step",
                                                                      "run_type": "iteration", "real_time": 1.0}]})
    rc, out, err = diff(tool, plain, rb)
    check(rc != 0 and "without xsym counters" in err and "plain.json" in err, f"no counters: rc {rc}, {err}")
    rc, out, err = diff(tool, os.path.join(work, "missing.json"), rb)
    check(rc != 0 and "missing.json" in err, f"missing file: rc {rc}, {err}")

    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("xsym-prof diff: the slower op first; noise marked within the spread; bad files refused")


if __name__ == "__main__":
    main()
