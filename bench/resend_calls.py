"""How the emails reached provider-sim as Resend: how many, in how many calls, how many of them
batch calls (`POST /emails/batch`, keel's call for emails sent at the same time).

Usage: python3 bench/resend_calls.py JOURNAL_JSON   (JOURNAL_JSON: GET /_sim/journal?provider=resend)
Prints one line: EMAILS CALLS BATCH_CALLS.
"""
import json
import sys

emails = calls = batches = 0
for entry in json.load(open(sys.argv[1])):
    if entry["method"] != "POST":
        continue
    if entry["path"] == "/emails":
        emails, calls = emails + 1, calls + 1
    elif entry["path"] == "/emails/batch":
        emails, calls, batches = emails + len(json.loads(entry["body"])), calls + 1, batches + 1
print(emails, calls, batches)
