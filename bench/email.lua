-- wrk script: POST one email per request.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"to": ["reader@example.com"], "subject": "Bench", "text": "Hello from the benchmark"}'
