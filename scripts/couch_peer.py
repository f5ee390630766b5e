"""What the scripts that record exchanges with a real CouchDB or measure beside it share: where
it runs (LT_TEST_COUCHDB_URL, with an admin's credentials in it), how to sign requests to it and
how much memory a server process holds."""
import base64
import os
import sys
import urllib.parse


def couch_url():
    """LT_TEST_COUCHDB_URL without a trailing slash; exits with a hint when it is not set."""
    url = os.environ.get("LT_TEST_COUCHDB_URL")
    if not url:
        sys.exit("LT_TEST_COUCHDB_URL is not set (http://admin:password@127.0.0.1:5984)")
    return url.rstrip("/")


def base_and_auth(url):
    """A server URL with credentials split into its base (`http://host:port`) and the value of
    an `Authorization: Basic` header for them."""
    parsed = urllib.parse.urlsplit(url)
    base = f"{parsed.scheme}://{parsed.hostname}:{parsed.port}"
    user = urllib.parse.unquote(parsed.username or "")
    password = urllib.parse.unquote(parsed.password or "")
    return base, "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def rss_mib(pid):
    """A process's resident memory (VmRSS) in MiB, 0 when /proc does not say."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
