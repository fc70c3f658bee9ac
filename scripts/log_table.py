#!/usr/bin/env python3
"""Prints the two 32-entry tables of the AVX-512 float32 log (XSYM_VLOG_AVX512 in
include/xsym/backend/cpu/vector_math.hpp).

The log writes x = 2^k z with z in [0.6953125, 1.390625) (the bits of x minus OFFSET), and
entry i covers the z whose bits, less OFFSET, have i in bits 18..22. Then
log x = k ln2 + logc_i + log1p(z invc_i - 1), logc_i = -log(invc_i).

invc_i is a float near 1 / (the entry's centre), chosen among its neighbours so that
-log(invc_i) rounds to a float with almost no error (logc_i is then exact to about 1e-4 of an
ulp): the table's own error does not add to the result's. The entry holding 1 has invc = 1
and logc = 0, so that near 1 the result is log1p of an exact z - 1. Entries 18 and 20, on
either side, are centred so that r = z invc - 1 stays below the result in binary exponent
(|r| < |log z| / 2 in ulps), which keeps r's rounding under a quarter ulp of the result.
"""
import math
import struct

OFFSET = 0x3f320000
CENTRE = {18: 0.9865, 20: 1.0215}  # the entries beside 1: see above
SEARCH = 4096  # neighbours of the centre's reciprocal tried, each way


def from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def to_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def to_float(x):
    return from_bits(to_bits(x))


def ulp(x):
    x = abs(to_float(x))
    return from_bits(to_bits(x) + 1) - x


def entry(i):
    lo, hi = from_bits(OFFSET + (i << 18)), from_bits(OFFSET + ((i + 1) << 18))
    if lo <= 1.0 < hi:
        return 1.0, 0.0
    near = to_bits(to_float(1.0 / CENTRE[i] if i in CENTRE else 2.0 / (lo + hi)))
    best = None
    for d in range(-SEARCH, SEARCH + 1):
        invc = from_bits(near + d)
        r = max(abs(lo * invc - 1), abs(hi * invc - 1))
        if r > (0.025 if i in CENTRE else 1 / 56) or (i in CENTRE and abs(invc - from_bits(near)) > 2e-4):
            continue
        exact = -math.log(invc)
        err = abs(to_float(exact) - exact) / ulp(exact)
        if best is None or err < best[0]:
            best = (err, invc, to_float(exact))
    return best[1], best[2]


def main():
    table = [entry(i) for i in range(32)]
    fmt = lambda v: "0.0f" if v == 0 else float.hex(v).replace("0000000p", "p") + "f"
    for name, col in (("invc", 0), ("logc", 1)):
        print(f"{name}:", ", ".join(fmt(t[col]) for t in table))


if __name__ == "__main__":
    main()
