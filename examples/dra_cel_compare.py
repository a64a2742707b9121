"""Compare two CEL libraries on the same three DRA selectors over 5000 devices, each at its best
(compile once, one context per device) — the figures of the README's "Dynamic Resource Allocation".

    python3 -m venv /tmp/celcmp && /tmp/celcmp/bin/pip install cel-python common-expression-language
    /tmp/celcmp/bin/python examples/dra_cel_compare.py rust    # common-expression-language
    /tmp/celcmp/bin/python examples/dra_cel_compare.py celpy   # cel-python
"""
import sys, time
from fractions import Fraction
EXPRS = ['device.driver == "gpu.example.com"',
         'device.attributes["gpu.example.com"].model == "a100" && device.attributes["gpu.example.com"].index < 4000',
         'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0']
def q(s):
    return [ "q", 2**30*int(s[:-2]), 1] if s.endswith("Gi") else ["q", int(s), 1]
def cmp(a, b):
    fa, fb = Fraction(a[1], a[2]), Fraction(b[1], b[2]); return (fa > fb) - (fa < fb)
devs = [{"driver": "gpu.example.com", "attributes": {"gpu.example.com": {"model": "a100" if i % 2 else "l4", "index": i}},
         "capacity": {"gpu.example.com": {"memory": ["q", (80 if i % 3 else 24) * 2**30, 1]}}} for i in range(5000)]
which = sys.argv[1]
if which == "rust":
    import cel
    progs = [cel.compile(e) for e in EXPRS]
    t = time.perf_counter(); n = 0
    for d in devs:
        ctx = cel.Context(variables={"device": d}, functions={"quantity": q, "compareTo": cmp})
        for p in progs: n += p.execute(ctx)
else:
    import celpy
    from celpy import celtypes
    env = celpy.Environment()
    f = {"quantity": lambda s: celpy.json_to_cel(q(str(s))),
         "compareTo": lambda a, b: celtypes.IntType(cmp([a[0], int(a[1]), int(a[2])], [b[0], int(b[1]), int(b[2])]))}
    progs = [env.program(env.compile(e), functions=f) for e in EXPRS]
    t = time.perf_counter(); n = 0
    for d in devs:
        act = {"device": celpy.json_to_cel(d)}
        for p in progs: n += bool(p.evaluate(act))
dt = time.perf_counter() - t
print(f"{which}: {len(devs)} devices x {len(EXPRS)} selectors: {dt:.2f}s, {dt/len(devs)/len(EXPRS)*1e6:.0f} us per evaluation, {n} true")
