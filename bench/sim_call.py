"""The last request provider-sim received from one provider, as a wrk script that sends it again:
the same method, path, headers and body, so that the simulator's own rate for the very call Keel
makes can be measured from the same kind of client.

Usage: python3 bench/sim_call.py JOURNAL_JSON OUT_LUA   (JOURNAL_JSON: GET /_sim/journal?provider=...)
Prints the request's path (and query), for wrk's URL.
"""
import json
import sys

entries = json.load(open(sys.argv[1]))
if not entries:
    sys.exit("the journal is empty: no provider call to repeat")
last = entries[-1]
skip = {"host", "content-length", "connection", "accept-encoding"}


def lua(text):
    # A JSON string with its escapes \" \\ \n \t is a valid Lua string literal.
    return json.dumps(text, ensure_ascii=False)


lines = [f"wrk.method = {lua(last['method'])}"]
for name, value in last["headers"]:
    if name not in skip:
        lines.append(f"wrk.headers[{lua(name)}] = {lua(value)}")
lines.append(f"wrk.body = {lua(last['body'])}")
with open(sys.argv[2], "w") as out:
    out.write("\n".join(lines) + "\n")
print(last["path"] + (f"?{last['query']}" if last.get("query") else ""))
