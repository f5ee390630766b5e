"""schemathesis hooks for Tests/Compatibility/openapi_conformance.py: every request comes from a
client address of its own (X-Forwarded-For, which the server there is told to believe), so the
login throttle — which makes a client that keeps failing wait, 429 — never carries one generated
request's failures over to the next. What the throttle does is AbuseTests' subject; here each
answer is checked against the document on its own."""
import itertools

import schemathesis

_addresses = (f"198.18.{n // 250 % 250}.{n % 250 + 1}" for n in itertools.count())


@schemathesis.hook
def before_call(context, case, kwargs):
    case.headers = {**(case.headers or {}), "X-Forwarded-For": next(_addresses)}
