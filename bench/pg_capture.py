"""The PostgreSQL ceiling of an endpoint: the statements it sends, run by pgbench.

Two commands, used by bench/lib.sh (pg_ceiling):

  python3 bench/pg_capture.py proxy LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT LOG
      A TCP proxy in front of PostgreSQL that passes every byte through unchanged and appends, to
      LOG, one JSON line per statement a client runs: its text with the parameters of its Bind
      message written in as SQL literals (the extended protocol's prepared statements are followed
      by name, per connection), or the text of a simple query. keel is pointed at the proxy for
      one request; the lines that request added are its statements.

  python3 bench/pg_capture.py script LOG OFFSET OUT [VARY_REGEX]
      Writes the lines of LOG past byte OFFSET as a pgbench script (one SQL command per line).
      Literals matching VARY_REGEX (e.g. an event id) become a fresh random value in each pgbench
      transaction, so that a write is not the same row every time. Prints the statement count.
      The statements a new connection sends before its first request (SETUP) are left out: a
      request that happened to open a connection would otherwise charge pgbench with them.

Only the frontend's messages are read, never changed; the backend's are copied as they come.
"""

import asyncio
import datetime
import json
import re
import struct
import sys
import uuid

# The parameter types Keel's statements bind (OID -> name), decoded from their binary form.
TYPES = {
    16: "bool", 17: "bytea", 20: "int8", 21: "int2", 23: "int4", 25: "text", 114: "json",
    700: "float4", 701: "float8", 1043: "varchar", 1082: "date", 1114: "timestamp",
    1184: "timestamptz", 2950: "uuid", 3802: "jsonb", 1009: "text[]", 1016: "int8[]",
    1007: "int4[]", 1015: "varchar[]", 2951: "uuid[]",
}
EPOCH = datetime.datetime(2000, 1, 1)


def quote(text):
    return "'" + text.replace("'", "''") + "'"


def decode_scalar(oid, data):
    """A binary parameter value as an SQL literal of its type."""
    name = TYPES.get(oid)
    if name in ("int2", "int4", "int8"):
        return str(int.from_bytes(data, "big", signed=True))
    if name == "bool":
        return "true" if data[0] else "false"
    if name in ("text", "varchar", "json"):
        return quote(data.decode()) + "::" + name
    if name == "jsonb":
        return quote(data[1:].decode()) + "::jsonb"
    if name == "float8":
        return repr(struct.unpack(">d", data)[0]) + "::float8"
    if name == "float4":
        return repr(struct.unpack(">f", data)[0]) + "::float4"
    if name == "uuid":
        return quote(str(uuid.UUID(bytes=data))) + "::uuid"
    if name in ("timestamp", "timestamptz"):
        micros = int.from_bytes(data, "big", signed=True)
        moment = EPOCH + datetime.timedelta(microseconds=micros)
        suffix = "+00" if name == "timestamptz" else ""
        return quote(moment.isoformat(sep=" ") + suffix) + "::" + name
    if name == "date":
        return quote((EPOCH.date() + datetime.timedelta(days=int.from_bytes(data, "big", signed=True))).isoformat()) + "::date"
    if name == "bytea":
        return quote("\\x" + data.hex()) + "::bytea"
    raise ValueError(f"parameter type {oid} is not decoded: add it to TYPES")


def decode(oid, fmt, data):
    if data is None:
        return "NULL"
    if fmt == 0:  # text format: the client sent the literal itself
        name = TYPES.get(oid)
        return quote(data.decode()) + (f"::{name}" if name else "")
    name = TYPES.get(oid, "")
    if name.endswith("[]"):
        dims, _flags, element = struct.unpack(">iiI", data[:12])
        pos = 12 + 8 * dims
        count = struct.unpack(">i", data[12:16])[0] if dims else 0
        items = []
        for _ in range(count):
            (length,) = struct.unpack(">i", data[pos:pos + 4])
            pos += 4
            items.append("NULL" if length < 0 else decode_scalar(element, data[pos:pos + length]))
            pos += max(length, 0)
        return f"ARRAY[{', '.join(items)}]::{name}"
    return decode_scalar(oid, data)


def cstring(buf, pos):
    end = buf.index(b"\0", pos)
    return buf[pos:end].decode(), end + 1


class Session:
    """One client connection's prepared statements, and the log it writes to."""

    def __init__(self, log):
        self.log = log
        self.statements = {}  # name -> (query, parameter OIDs)

    def message(self, kind, body):
        if kind == b"P":
            name, pos = cstring(body, 0)
            query, pos = cstring(body, pos)
            (count,) = struct.unpack(">h", body[pos:pos + 2])
            oids = list(struct.unpack(f">{count}I", body[pos + 2:pos + 2 + 4 * count]))
            self.statements[name] = (query, oids)
        elif kind == b"B":
            _portal, pos = cstring(body, 0)
            name, pos = cstring(body, pos)
            query, oids = self.statements.get(name, ("", []))
            (nfmt,) = struct.unpack(">h", body[pos:pos + 2])
            fmts = list(struct.unpack(f">{nfmt}h", body[pos + 2:pos + 2 + 2 * nfmt]))
            pos += 2 + 2 * nfmt
            (nparams,) = struct.unpack(">h", body[pos:pos + 2])
            pos += 2
            values = []
            for i in range(nparams):
                (length,) = struct.unpack(">i", body[pos:pos + 4])
                pos += 4
                data = None if length < 0 else body[pos:pos + length]
                pos += max(length, 0)
                fmt = fmts[i] if nfmt > 1 else (fmts[0] if nfmt == 1 else 0)
                values.append(decode(oids[i] if i < len(oids) else 0, fmt, data))
            self.write(re.sub(r"\$(\d+)", lambda m: values[int(m.group(1)) - 1], query))
        elif kind == b"Q":
            self.write(body.rstrip(b"\0").decode())

    def write(self, sql):
        self.log.write(json.dumps({"sql": sql}) + "\n")
        self.log.flush()


async def pipe_backend(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def pipe_frontend(reader, writer, session):
    """Copies the client's bytes to the server, reading each message on the way."""
    buf = b""
    started = False
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            buf += data
            while True:
                if not started:  # the startup packet (or an SSL request) has no type byte
                    if len(buf) < 4:
                        break
                    (length,) = struct.unpack(">i", buf[:4])
                    if len(buf) < length:
                        break
                    code = struct.unpack(">i", buf[4:8])[0] if length >= 8 else 0
                    buf = buf[length:]
                    started = code not in (80877103, 80877104)  # SSLRequest, GSSENCRequest
                    continue
                if len(buf) < 5:
                    break
                (length,) = struct.unpack(">i", buf[1:5])
                if len(buf) < 1 + length:
                    break
                kind, body, buf = buf[:1], buf[5:1 + length], buf[1 + length:]
                session.message(kind, body)
    finally:
        writer.close()


async def proxy(listen_port, host, port, log_path):
    log = open(log_path, "a")

    async def serve(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection(host, port)
        session = Session(log)
        await asyncio.gather(
            pipe_frontend(client_reader, server_writer, session),
            pipe_backend(server_reader, client_writer),
            return_exceptions=True,
        )

    server = await asyncio.start_server(serve, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


# What a connection is opened with, once: diesel-async's settings (AsyncPgConnection::establish)
# and the kernel's (plan_cache_mode; pgbench's statements carry literals, planned once anyway).
SETUP = re.compile(r"^\s*SET (TIME ZONE|CLIENT_ENCODING|plan_cache_mode) ", re.IGNORECASE)


def script(log_path, offset, out_path, vary=None):
    with open(log_path) as log:
        log.seek(offset)
        statements = [json.loads(line)["sql"] for line in log if line.strip()]
    statements = [sql for sql in statements if not SETUP.match(sql)]
    lines = []
    if vary:
        lines.append("\\set vary random(1, 1000000000000)")
    for sql in statements:
        sql = " ".join(sql.split())  # one line per command; Keel's literals hold no newlines
        if vary:
            sql = re.sub(
                "'(" + vary + ")'",
                lambda m: "('" + m.group(1).replace("'", "''") + "_' || :vary)",
                sql,
            )
        lines.append(sql.rstrip(";") + ";")
    with open(out_path, "w") as out:
        out.write("\n".join(lines) + "\n")
    return len(statements)


if __name__ == "__main__":
    if sys.argv[1] == "proxy":
        asyncio.run(proxy(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    elif sys.argv[1] == "script":
        print(script(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None))
    else:
        sys.exit(f"unknown command {sys.argv[1]}: proxy or script")
