# Independent lookup2 (Bob Jenkins' reference C, transcribed) + bloomflow's native position rule.
M32 = 0xffffffff
def mix(a, b, c):
    a = (a - b - c) & M32; a ^= c >> 13
    b = (b - c - a) & M32; b ^= (a << 8) & M32
    c = (c - a - b) & M32; c ^= b >> 13
    a = (a - b - c) & M32; a ^= c >> 12
    b = (b - c - a) & M32; b ^= (a << 16) & M32
    c = (c - a - b) & M32; c ^= b >> 5
    a = (a - b - c) & M32; a ^= c >> 3
    b = (b - c - a) & M32; b ^= (a << 10) & M32
    c = (c - a - b) & M32; c ^= b >> 15
    return a, b, c
def lookup2(k, initval):
    length = len(k); a = b = 0x9e3779b9; c = initval; i = 0; ln = length
    while ln >= 12:
        a = (a + int.from_bytes(k[i:i+4], 'little')) & M32
        b = (b + int.from_bytes(k[i+4:i+8], 'little')) & M32
        c = (c + int.from_bytes(k[i+8:i+12], 'little')) & M32
        a, b, c = mix(a, b, c); i += 12; ln -= 12
    c = (c + length) & M32
    t = k[i:]
    # switch fallthrough: c gets bytes 8..10 shifted by 8,16,24; b bytes 4..7; a bytes 0..3
    for j in range(ln):
        if j >= 8: c = (c + (t[j] << (8 * (j - 7)))) & M32
        elif j >= 4: b = (b + (t[j] << (8 * (j - 4)))) & M32
        else: a = (a + (t[j] << (8 * j))) & M32
    a, b, c = mix(a, b, c)
    return c
M64 = (1 << 64) - 1
def positions(key, seed, m, k):
    a = lookup2(key, seed); b = lookup2(key, seed ^ 0x9E3779B9)
    x = (a << 32) | b; y = (b << 32) | a; out = []
    for i in range(k):
        out.append((x * m) >> 64); x = (x + y) & M64; y = (y + i) & M64
    return out
print("EMPTY", (lookup2(b"", 0), lookup2(b"", 0x9E3779B9)))
print("HELLO", (lookup2(b"hello", 0), lookup2(b"hello", 0x9E3779B9)))
print("H1000", positions(b"hello", 0, 1000, 7))
print("CUST", positions(b"customer-42", 7, 9585059, 7))
print("E64", positions(b"", 0, 64, 3))
print("BIG", positions(b"big", 1, 1 << 40, 4))
# Known published lookup2 check value would be nice; cross-check vs the crate's example instead.
