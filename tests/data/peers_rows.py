# Independent transcription of the probe.csv row rule of ../shared/PEERS.md, used to make the
# reference rows that src/gen.rs is tested against.
import datetime, sys
M = (1 << 64) - 1
def splitmix64(x):
    z = ((x + 1) * 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
def probe_row(i):
    h1 = splitmix64(i); h2 = splitmix64(i + (1 << 40))
    ts = datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=(h1 >> 32) % 31536000)
    a = (h2 >> 40) % 1000000
    return (f"{i},{h1 % 20000000},{ts.strftime('%Y-%m-%dT%H:%M:%S')},{a // 100}.{a % 100:02d},"
            f"pl-{h2:016x}-{format(h1, '016x')[:10]}\n")
if __name__ == "__main__":
    for i in [0, 1, 2, 3, 999, 123456, 1999999, 19999999]:
        print(f"        ({i}, \"{probe_row(i)[:-1]}\\n\"),")
