"""Closed-loop HTTP/1.1 clients for the paths wrk cannot drive: each connection repeats one
exchange for a given time, and the figures are exchanges completed per second and the latency of
one exchange (p50, p99).

Usage: python3 bench/closed_loop.py MODE HOST PORT SECONDS CONNECTIONS

Modes:
  stream  POST /ai/chat/stream (a 20-word message) and read the server-sent events to the
          `complete` event. Latency: the whole stream.
  openai  The same stream straight from the provider simulator's OpenAI route
          (POST /openai/v1/chat/completions, stream: true), read to `data: [DONE]`.

Keep-alive connections (one per client); a response may have a Content-Length or be chunked. Any
other answer than the expected one fails the run. Prints one line on stdout:
"RATE P50_MS P99_MS COUNT REQUESTS_PER_EXCHANGE", and a readable line on stderr.
"""
import asyncio
import json
import sys
import time

MODE, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
SECONDS, CONNECTIONS = float(sys.argv[4]), int(sys.argv[5])
MESSAGE = " ".join(f"word{i}" for i in range(20))


class Failure(Exception):
    pass


def request(method, path, body=None, headers=()):
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\n"
    for name, value in headers:
        head += f"{name}: {value}\r\n"
    if body is not None:
        data = json.dumps(body).encode()
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        return head.encode() + data
    return (head + "\r\n").encode()


async def read_response(reader):
    """(status, body) of one response, Content-Length or chunked."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, chunked = None, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value:
            chunked = True
    if chunked:
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers are sent
                return status, bytes(body)
            body += await reader.readexactly(size + 2)
            del body[-2:]
    if length is not None:
        return status, await reader.readexactly(length)
    raise Failure(f"HTTP {status} without a length: not a keep-alive answer")


async def stream_exchange(reader, writer):
    writer.write(request("POST", "/ai/chat/stream", {"message": MESSAGE},
                         [("Accept", "text/event-stream")]))
    status, body = await read_response(reader)
    if status != 200 or b"event: complete" not in body:
        raise Failure(f"stream: HTTP {status} {body[-300:]!r}")
    return 1


async def openai_exchange(reader, writer):
    writer.write(request(
        "POST", "/openai/v1/chat/completions",
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": MESSAGE}]},
        [("Authorization", "Bearer sim-ai-key"), ("Accept", "text/event-stream")]))
    status, body = await read_response(reader)
    if status != 200 or b"data: [DONE]" not in body:
        raise Failure(f"openai stream: HTTP {status} {body[-300:]!r}")
    return 1


EXCHANGES = {"stream": stream_exchange, "openai": openai_exchange}


async def client(exchange, deadline, latencies, counts):
    reader, writer = await asyncio.open_connection(HOST, PORT, limit=1 << 20)
    try:
        while True:
            start = time.perf_counter()
            requests = await exchange(reader, writer)
            end = time.perf_counter()
            if end > deadline:
                return
            latencies.append(end - start)
            counts.append(requests)
    finally:
        writer.close()


async def main():
    exchange = EXCHANGES[MODE]
    latencies, counts = [], []
    start = time.perf_counter()
    deadline = start + SECONDS
    clients = [asyncio.create_task(client(exchange, deadline, latencies, counts))
               for _ in range(CONNECTIONS)]
    # A client still in an exchange at the deadline is not waited for.
    done, pending = await asyncio.wait(clients, timeout=SECONDS + 0.05)
    for task in pending:
        task.cancel()
    errors = [task.exception() for task in done if task.exception()]
    if errors:
        sys.exit(f"closed_loop {MODE}: {len(errors)} of {CONNECTIONS} clients failed, the first with "
                 f"{type(errors[0]).__name__}: {errors[0]}")
    if not latencies:
        sys.exit(f"closed_loop {MODE}: no exchange completed in {SECONDS} s")
    latencies.sort()
    n = len(latencies)
    rate = n / SECONDS
    p50 = latencies[n // 2] * 1000
    p99 = latencies[min(n - 1, int(n * 0.99))] * 1000
    per = sum(counts) / n
    print(f"{rate:.1f} {p50:.3f} {p99:.3f} {n} {per:.2f}")
    print(f"{MODE}: {rate:.1f}/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms, {n} in {SECONDS:g} s, "
          f"{per:.2f} requests each", file=sys.stderr)


asyncio.run(main())
