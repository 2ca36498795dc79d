wrk.method = "POST"
wrk.body = "username=bench%40example.com&password=bench-password-1"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
