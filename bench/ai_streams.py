"""Opens N server-sent-event streams at once and reports when each saw its first chunk.

Usage: python3 bench/ai_streams.py HOST PORT PATH COUNT HOLD_SECONDS [PID]
Prints the number of streams that got a first chunk, the time to first chunk (median, p99), and,
with PID, that process's RSS while every stream is open.
"""
import asyncio
import collections
import statistics
import sys
import time

HOST, PORT, PATH = sys.argv[1], int(sys.argv[2]), sys.argv[3]
COUNT, HOLD = int(sys.argv[4]), float(sys.argv[5])
PID = sys.argv[6] if len(sys.argv) > 6 else None
BODY = b'{"message": "' + b"word " * 100 + b'"}'
REQUEST = (
    f"POST {PATH} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
    f"Accept: text/event-stream\r\nContent-Length: {len(BODY)}\r\n\r\n"
).encode() + BODY


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def one(first, opened, failed):
    start = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection(HOST, PORT)
    except OSError as e:
        failed[f"connect: {e.strerror or e}"] += 1
        return
    seen = b""
    try:
        writer.write(REQUEST)
        await writer.drain()
        while b"event: chunk" not in seen:
            data = await reader.read(4096)
            if not data:
                status = seen.split(b"\r\n", 1)[0].decode(errors="replace") or "no answer"
                failed[f"closed before a chunk ({status})"] += 1
                return
            seen += data
        first.append(time.monotonic() - start)
        opened.set() if len(first) == COUNT else None
        await asyncio.sleep(HOLD)
    except OSError as e:
        failed[f"read: {e.strerror or e}"] += 1
    finally:
        writer.close()


async def main():
    first, opened, failed = [], asyncio.Event(), collections.Counter()
    before = rss_kib(PID) if PID else 0
    tasks = [asyncio.create_task(one(first, opened, failed)) for _ in range(COUNT)]
    try:
        await asyncio.wait_for(opened.wait(), timeout=HOLD)
    except asyncio.TimeoutError:
        pass
    during = rss_kib(PID) if PID else 0
    got = len(first)
    print(f"streams with a first chunk: {got} of {COUNT}")
    waiting = COUNT - got - sum(failed.values())
    if waiting:
        failed[f"no chunk within {HOLD:.0f} s"] = waiting
    if failed:
        print("the others: " + ", ".join(f"{n} {why}" for why, n in failed.most_common()))
    if got:
        first.sort()
        p99 = first[min(got - 1, int(got * 0.99))]
        print(f"time to first chunk: median {statistics.median(first) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    if PID and got:
        print(f"server RSS: {before / 1024:.1f} MiB before, {during / 1024:.1f} MiB with {got} streams open, "
              f"{(during - before) / got:.1f} KiB per stream")
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


asyncio.run(main())
