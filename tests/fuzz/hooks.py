"""schemathesis hooks for tests/fuzz/run.sh."""

import schemathesis


@schemathesis.check
def error_has_detail(ctx, response, case):
    """Every 4xx answer is a JSON object carrying `detail`."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = response.json()
    except Exception:
        raise AssertionError(f"{response.status_code} without a JSON body: {response.text[:200]!r}")
    if not isinstance(body, dict) or "detail" not in body:
        raise AssertionError(f"{response.status_code} JSON body without `detail`: {response.text[:200]!r}")
    return None
