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

# --- lookup3 hashlittle2 and the blocked layout (Scheme::NativeLookup3, Layout::Blocked) ---
def rot(x, k):
    return ((x << k) | (x >> (32 - k))) & M32
def l3mix(a, b, c):
    a = (a - c) & M32; a ^= rot(c, 4); c = (c + b) & M32
    b = (b - a) & M32; b ^= rot(a, 6); a = (a + c) & M32
    c = (c - b) & M32; c ^= rot(b, 8); b = (b + a) & M32
    a = (a - c) & M32; a ^= rot(c, 16); c = (c + b) & M32
    b = (b - a) & M32; b ^= rot(a, 19); a = (a + c) & M32
    c = (c - b) & M32; c ^= rot(b, 4); b = (b + a) & M32
    return a, b, c
def l3final(a, b, c):
    c ^= b; c = (c - rot(b, 14)) & M32
    a ^= c; a = (a - rot(c, 11)) & M32
    b ^= a; b = (b - rot(a, 25)) & M32
    c ^= b; c = (c - rot(b, 16)) & M32
    a ^= c; a = (a - rot(c, 4)) & M32
    b ^= a; b = (b - rot(a, 14)) & M32
    c ^= b; c = (c - rot(b, 24)) & M32
    return a, b, c
def hashlittle2(k, pc, pb):
    a = b = c = (0xdeadbeef + len(k) + pc) & M32
    c = (c + pb) & M32
    while len(k) > 12:
        a = (a + int.from_bytes(k[0:4], 'little')) & M32
        b = (b + int.from_bytes(k[4:8], 'little')) & M32
        c = (c + int.from_bytes(k[8:12], 'little')) & M32
        a, b, c = l3mix(a, b, c); k = k[12:]
    if len(k) == 0:
        return c, b
    t = k + bytes(12 - len(k))
    a = (a + int.from_bytes(t[0:4], 'little')) & M32
    b = (b + int.from_bytes(t[4:8], 'little')) & M32
    c = (c + int.from_bytes(t[8:12], 'little')) & M32
    a, b, c = l3final(a, b, c)
    return c, b
def remix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)
def lookup3_positions(key, seed, m, k):
    c, b = hashlittle2(key, seed, 0)
    x = (c << 32) | b; y = (b << 32) | c; out = []
    for i in range(k):
        out.append((x * m) >> 64); x = (x + y) & M64; y = (y + i) & M64
    return out
def blocked_positions(key, seed, m, k):
    c, b = hashlittle2(key, seed, 0)
    x = (c << 32) | b
    block = (x * (m // 512)) >> 64
    z0 = remix(x); z = z0; out = []
    for i in range(k):
        if i > 0 and i % 7 == 0:
            z = remix((z0 + i) & M64)
        out.append(block * 512 + (z & 511)); z >>= 9
    return out
print("L3_HELLO", hashlittle2(b"hello", 0, 0))
print("L3_HELLO_1000_7", lookup3_positions(b"hello", 0, 1000, 7))
print("BLK_HELLO_51200_7", blocked_positions(b"hello", 0, 51200, 7))
print("BLK_CUST_5120000_10", blocked_positions(b"customer-42", 7, 5120000, 10))
print("BLK_EMPTY_512_3", blocked_positions(b"", 0, 512, 3))
