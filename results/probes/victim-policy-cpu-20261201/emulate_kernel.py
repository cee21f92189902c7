"""usage: python emulate_kernel.py PATCHED_TREE   (a copy of the tree with oldest-victims.patch applied)

Emulates the kernel's oldest_victims (thread runs, histogram, threshold, two prefix sums) and compares
it with the reference's clock.oldest_victims on random states."""
import random, torch, sys
sys.path.insert(0, sys.argv[1])
from hisparse.kernels.reference.clock import oldest_victims, AGE_BUCKETS
from hisparse.kernels.state import EPOCH_MASK
T = 1024
def kernel(ref, epoch, cursor, hot, misses):
    if misses == 0: return []
    per = (hot + T - 1) // T
    slot_at = lambda i: (cursor + i) % hot
    def age(s):
        if ref[s] == epoch: return -1
        return min((epoch - ref[s]) & EPOCH_MASK, AGE_BUCKETS - 1)
    hist = [0] * AGE_BUCKETS
    for i in range(hot):
        a = age(slot_at(i))
        if a >= 0: hist[a] += 1
    t, need, above = -1, 0, 0
    for a in range(AGE_BUCKETS - 1, -1, -1):
        if above + hist[a] >= misses: t, need = a, misses - above; break
        above += hist[a]
    if t < 0: t, need = 0, hist[0]
    runs = [range(min(hot, x * per), min(hot, min(hot, x * per) + per)) for x in range(T)]
    at_t = [sum(1 for i in r if age(slot_at(i)) == t) for r in runs]
    t_rank = [sum(at_t[:x]) for x in range(T)]
    sel = []
    for x, r in enumerate(runs):
        k = t_rank[x]
        for i in r:
            a = age(slot_at(i))
            if a > t or (a == t and k < need):
                sel.append(slot_at(i))
            if a == t: k += 1
    out = sel + [-1] * (misses - len(sel))
    return out
rng = random.Random(1)
for trial in range(300):
    hot = rng.choice([8, 100, 1024, 1500, 4096])
    epoch = rng.randint(1, 200)
    ref = [rng.choice([epoch, 0, max(1, epoch - rng.randint(1, 150)), epoch - 1 if epoch > 1 else 0]) for _ in range(hot)]
    cursor = rng.randrange(hot)
    misses = rng.randint(0, hot + 5)
    want = oldest_victims(torch.tensor(ref, dtype=torch.int32), epoch, cursor, misses).tolist()
    got = kernel(ref, epoch, cursor, hot, misses)
    assert got == want, (trial, hot, misses)
print("kernel emulation == reference on 300 random states")
