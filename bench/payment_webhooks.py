"""Sends N signed Stripe events to the payment webhook from concurrent keep-alive connections.

Usage: python3 bench/payment_webhooks.py HOST PORT SECRET [EVENTS] [SENDERS] [FIRST] [ANSWER_FILE]
(defaults: 20000 events, 16 senders, numbered from FIRST = 0; a later batch starts where one ended;
with ANSWER_FILE, the body of the last answer is written there)

Every event has its own id, so each one is processed (none is a duplicate). Four in five are
`payment_intent.succeeded` for a new payment (100 customers in turn); from event 1,002 on, every
fifth is a partial `charge.refunded` of the payment 1,002 events earlier, long since stored. All
events are built and signed before the clock starts, and before it one earlier payment per
customer is sent (100 events, each naming another customer), so the customers are known, as
after a checkout, and no two events in flight create the same customer row. Every answer must be
200 and not a duplicate, else the run fails. Prints events/s and the latency of one delivery
(p50, p99): "EVENTS_PER_S P50_MS P99_MS" on stdout, and a readable line on stderr. The signatures carry the time they were made, so a run must end within the server's
tolerance (5 min).
"""
import asyncio
import hashlib
import hmac
import json
import sys
import time

HOST, PORT, SECRET = sys.argv[1], int(sys.argv[2]), sys.argv[3]
EVENTS = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
SENDERS = int(sys.argv[5]) if len(sys.argv) > 5 else 16
FIRST = int(sys.argv[6]) if len(sys.argv) > 6 else 0
ANSWER_FILE = sys.argv[7] if len(sys.argv) > 7 else None
PATH = "/api/v1/payment/webhook"
REFUND_LAG = 1002  # a refund names payment n - 1002 (n % 5 == 4, so that one is a payment)


def event(n):
    if n % 5 == 4 and n >= REFUND_LAG:
        k = n - REFUND_LAG
        return {
            "id": f"evt_{n}", "object": "event", "type": "charge.refunded", "created": n,
            "livemode": False,
            "data": {"object": {
                "id": f"ch_{k}", "object": "charge", "payment_intent": f"pi_{k}",
                "amount": 1000, "amount_refunded": 300, "refunded": False, "currency": "usd",
                "customer": f"cus_{k % 100}", "status": "succeeded",
                "refunds": {"object": "list", "data": [
                    {"id": f"re_{k}", "object": "refund", "amount": 300, "currency": "usd",
                     "charge": f"ch_{k}", "status": "succeeded"}]},
            }},
        }
    return {
        "id": f"evt_{n}", "object": "event", "type": "payment_intent.succeeded", "created": n,
        "livemode": False,
        "data": {"object": {
            "id": f"pi_{n}", "object": "payment_intent", "amount": 1000, "amount_received": 1000,
            "currency": "usd", "customer": f"cus_{n % 100}", "latest_charge": f"ch_{n}",
            "status": "succeeded", "description": f"Order {n}", "metadata": {"user_id": "1"},
        }},
    }


def earlier_payment(c):
    return {
        "id": f"evt_earlier_{c}", "object": "event", "type": "payment_intent.succeeded",
        "created": 0, "livemode": False,
        "data": {"object": {
            "id": f"pi_earlier_{c}", "object": "payment_intent", "amount": 1000,
            "amount_received": 1000, "currency": "usd", "customer": f"cus_{c}",
            "latest_charge": f"ch_earlier_{c}", "status": "succeeded", "metadata": {"user_id": "1"},
        }},
    }


def signed_request(payload, t):
    body = json.dumps(payload, separators=(",", ":")).encode()
    tag = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\nContent-Type: application/json\r\n"
        f"Stripe-Signature: t={t},v1={tag}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, body


async def sender(requests, latencies, failures, answers):
    reader, writer = await asyncio.open_connection(HOST, PORT)
    try:
        while requests:
            n, request = requests.pop()
            start = time.perf_counter()
            writer.write(request)
            status, body = await read_response(reader)
            latencies.append(time.perf_counter() - start)
            answers[:] = [body]
            if status != 200 or b'"duplicate"' in body:
                failures.append((n, status, body[:200]))
    finally:
        writer.close()


async def main():
    t = int(time.time())
    requests = [(n, signed_request(event(n), t)) for n in range(FIRST, FIRST + EVENTS)]
    requests.reverse()  # pop() takes them in order
    latencies, failures, answers = [], [], []
    if FIRST == 0:
        earlier = [(f"earlier_{c}", signed_request(earlier_payment(c), t)) for c in range(100)]
        await asyncio.gather(*(sender(earlier, [], failures, answers) for _ in range(SENDERS)))
    start = time.perf_counter()
    await asyncio.gather(*(sender(requests, latencies, failures, answers) for _ in range(SENDERS)))
    elapsed = time.perf_counter() - start
    if failures:
        for n, status, body in failures[:5]:
            print(f"event {n}: HTTP {status} {body!r}", file=sys.stderr)
        sys.exit(f"{len(failures)} of {EVENTS} deliveries failed")
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    if ANSWER_FILE and answers:
        with open(ANSWER_FILE, "wb") as f:
            f.write(answers[0])
    print(f"{EVENTS / elapsed:.1f} {p50:.3f} {p99:.3f}")
    print(f"{EVENTS / elapsed:.0f} events/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms "
          f"({EVENTS} events, {SENDERS} senders, {elapsed:.2f} s, every answer 200)", file=sys.stderr)


asyncio.run(main())
