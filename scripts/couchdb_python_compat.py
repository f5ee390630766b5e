#!/usr/bin/env python3
"""Runs CouchDB-Python 1.2's own test suite against a running `lt serve` and checks the outcome.

Every test must pass except those listed in Tests/Compatibility/couchdb-python-expected-failures.txt,
each with its reason (CouchDB 3 itself fails it, or it needs a feature of a later issue). A listed
test that starts passing is reported so the list can shrink. Exit status 1 on any unexpected failure.

Usage: COUCHDB_URL=http://admin:secret@127.0.0.1:5984/ python3 scripts/couchdb_python_compat.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "..", "Tests", "Compatibility", "couchdb-python-expected-failures.txt")


def expected_failures():
    reasons = {}
    with open(EXPECTED) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            reasons[name] = reason.strip()
    return reasons


def test_name(test):
    # doctests are named like "query (couchdb.client.Database)"; unittest ids are dotted.
    return test.id()


def main():
    if "COUCHDB_URL" not in os.environ:
        sys.exit("COUCHDB_URL must name the server, e.g. http://admin:secret@127.0.0.1:5984/")
    from couchdb.tests.__main__ import suite

    result = unittest.TestResult()
    tests = suite()
    tests.run(result)
    failed = {test_name(t): tb for t, tb in result.failures + result.errors}
    total = result.testsRun
    allowed = expected_failures()
    unexpected = sorted(set(failed) - set(allowed))
    now_passing = sorted(name for name in allowed if name not in failed)
    for name in unexpected:
        print(f"UNEXPECTED FAILURE: {name}\n{failed[name]}")
    for name in now_passing:
        if "flaky" in allowed[name] or "race" in allowed[name]:
            print(f"passed this time (its outcome varies run to run): {name}")
        else:
            print(f"now passes (remove it from the expected-failures list): {name}")
    expected_count = len(set(failed) & set(allowed))
    print(f"couchdb-python 1.2 suite: {total} tests, {total - len(failed)} pass, "
          f"{expected_count} fail as expected (listed with reasons), {len(unexpected)} fail unexpectedly")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
