"""Prints one top-level field of the JSON object on stdin: python3 bench/json_field.py NAME.
Fails when the input is not a JSON object holding NAME."""
import json
import sys

value = json.load(sys.stdin)[sys.argv[1]]
print(value if isinstance(value, str) else json.dumps(value))
