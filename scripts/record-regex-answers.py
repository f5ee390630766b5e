#!/usr/bin/env python3
"""Record which strings Apache CouchDB's Mango `$regex` matches, for Tests/Compatibility.

Needs a running CouchDB (LT_TEST_COUCHDB_URL=http://admin:pw@127.0.0.1:5984; see
docs/compatibility.md). Makes a database `regex` holding one document per subject string
(`{"_id": "s07", "v": "…"}`: ASCII, UTF-8, newlines, control bytes), then asks `_find` with
`{"v": {"$regex": pattern}}` for every pattern below — hand-picked edge cases of PCRE's syntax
and meaning (bytes not characters, anchors and newlines, caseless, escapes, classes,
quantifiers, what PCRE refuses) and patterns generated from a seed — and writes
Tests/Compatibility/Fixtures/couchdb-regex-answers.json: the subjects, and for each pattern the
ids CouchDB returned or its error. `RegexAnswerReplayTests` asks lt the same and expects the
same, except for the patterns lt refuses on purpose (they need backtracking: back-references,
lookaround, atomic groups, possessive quantifiers, recursion, conditions, Unicode properties).

With --compare URL, asks that server too (an `lt serve`, say) and prints every answer that
differs, instead of writing the fixture.
"""
import json
import os
import random
import sys
import urllib.error
import urllib.request
from couch_peer import base_and_auth, couch_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Tests", "Compatibility", "Fixtures", "couchdb-regex-answers.json")
DB = "regex"

SUBJECTS = [
    "", "a", "b", "ab", "abc", "ABC", "aBc", "abcabc", "xabcx", "abc\n", "abc\n\n", "a\nb", "a\nb\n", "\n", "a\r\nb",
    "x", "xx", "xxx", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy", "aaa", "aaaa", "a{", "a{,3}", "a{2}", "{}", "a.b", "axb",
    "é", "e\u0301", "café", "CAFÉ", "É", "naïve", "日本", "😀", "ß", "a-b", "a_b", "a b", "a\tb", "\x0b", "\x01", "\x08",
    "123", "12a", "a1", "-1.5", "foo@bar.com", "http://x.y/z?q=1", "[x]", "(x)", "a|b", "\\", "$", "^", "a$b", "3.14",
    "line1\nline2", "  padded  ", "tab\tsep", "under_score", "CamelCase", "ABC123def", "\u00a0", "\u0085",
]

PATTERNS = [
    # Bytes, not characters (no `unicode` option): a UTF-8 é is two bytes.
    "^.$", "^..$", "^...$", "é", "^é$", "^[é]$", "[é]", "^[é]{2}$", "caf.", "caf..$", "(?i)É", "(?i)é", "(?i)CAFÉ", "\\w", "^\\w+$",
    "\\W", "^\\W+$", "[^a-z]", "^[\\x00-\\x7f]+$", "[\\x80-\\xff]", "\\xc3\\xa9", "^\\C$", "😀", "^.{4}$", "日", "^.{6}$",
    # Anchors and newlines.
    "abc$", "abc\\z", "abc\\Z", "^b", "(?m)^b", "(?m)b$", "a$", "(?m)a$", "(?m)^$", "^$", "\\A", "\\Aa", "\\Ga", "a\\z", "$\\n",
    "a.b", "(?s)a.b", "a\\Nb", "\\n", "\\r\\n", "\\Rb", "^\\s*$", "^\\S+$", "\\s", "\\h", "\\v", "\\H", "\\V",
    # Caseless and options.
    "(?i)abc", "(?i)ABC", "(?i:A)b", "(?i:a)B", "a(?i)bc", "(?i)[a-c]+", "(?i)[^a]", "(?-i)a", "(?x) a b c", "(?x)a#c\nb", "(?im)^B",
    "(?s-s)a.b", "(?U)a+", "(?J)a",
    # Escapes.
    "\\x41", "\\x{41}", "\\x{e9}", "\\101", "\\0101", "\\012", "\\cA", "\\ca", "\\e", "\\t", "[\\b]", "\\8", "\\9", "\\o{101}",
    "\\Qa.b\\E", "\\Qa.b", "a\\E", "\\.", "\\$", "\\^", "\\\\", "\\[x\\]", "\\(x\\)", "\\|", "\\i", "\\y", "a\\Kb", "\\$b",
    # Classes.
    "[[:alpha:]]+", "[[:^alpha:]]", "[[:digit:]]", "[[:space:]]", "[[:punct:]]", "[[:upper:]]", "[[:word:]]", "[[:xdigit:]]+$",
    "[]a]", "[^]a]", "[a-]", "[-a]", "[a\\-z]", "[a-\\d]", "[\\d-z]", "[\\w.]+@", "[.]", "[$]", "[\\^]", "[^^]", "[a-c-e]",
    "[\\]]", "[\\\\]", "[\\Qa-z\\E]", "[[]", "[[:alpha:]-]",
    # Quantifiers.
    "a{", "a{,3}", "a{2}", "^a{2}$", "^a{2,}$", "^a{1,2}$", "^a{0}$", "a{0,0}", "x{2,3}y", "^(ab)*$", "^(ab)+$", "(ab)?c",
    "a*?", "a+?b", "a??b", "a{2}?", "(a|b)*c", "(|a)b", "a|", "|", "()", "(?:)", "^(a*)*$", "^(x+x+)+y$", "^(x|x)*y$",
    "^(?:x?){30}x{30}$", "(x+)+\\b\\d", "(.*a){8}",
    # Alternation and groups.
    "abc|xyz", "^(?:a|b)$", "^(a|b|c)+$", "(?<n>a)", "(?P<n>a)b", "(?'n'a)", "(?#comment)a", "(?|a|b)", "a(?i)b|c",
    # PCRE refuses these (CouchDB answers an error).
    "(", ")", "(a", "a)", "[a", "*a", "+a", "?a", "a**", "a{2,1}", "\\", "x{70000}", "[z-a]", "(?Q)", "\\L", "\\u", "[[:nope:]]",
    "(?<>a)", "a{2}{3}", "^*", "$+", "\\b*", "(?i)*",
    # Needs backtracking: CouchDB answers; lt refuses on purpose.
    "(a)\\1", "(a)\\g1", "(?<n>a)\\k<n>", "(?=a)", "(?!a)b", "(?<=a)b", "(?<!a)b", "a++", "a*+b", "(?>a+)b", "(?(1)a|b)",
    "(a)(?1)", "(?R)?", "\\p{L}", "\\P{L}", "\\X", "(*UTF8)é",
]


def generated(seed, count):
    """Random patterns over the syntax, from a seed."""
    rnd = random.Random(seed)
    atoms = ["a", "b", "c", "x", ".", "é", "\\w", "\\d", "\\s", "[a-c]", "[^a]", "[é]", "\\.", "-", " ", "\\n", "(?i:a)", "[[:alpha:]]"]

    def pattern(depth=0):
        roll = rnd.randrange(100)
        if depth > 3 or roll < 30:
            return rnd.choice(atoms)
        if roll < 45:
            return "(" + pattern(depth + 1) + ")"
        if roll < 55:
            return "(?:" + pattern(depth + 1) + "|" + pattern(depth + 1) + ")"
        if roll < 80:
            return pattern(depth + 1) + pattern(depth + 1)
        if roll < 92:
            return "(?:" + pattern(depth + 1) + ")" + rnd.choice(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?"])
        return rnd.choice(["^", "$", "\\b", "\\B", "(?m)^", "(?i)"]) + pattern(depth + 1)

    return [pattern() for _ in range(count)]


def request(base, auth, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": auth, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def answers(url, patterns):
    base, auth = base_and_auth(url)
    request(base, auth, "DELETE", f"/{DB}")
    status, _ = request(base, auth, "PUT", f"/{DB}")
    assert status in (201, 202), status
    docs = [{"_id": f"s{i:02d}", "v": s} for i, s in enumerate(SUBJECTS)]
    status, _ = request(base, auth, "POST", f"/{DB}/_bulk_docs", {"docs": docs})
    assert status == 201, status
    out = []
    for pattern in patterns:
        status, body = request(base, auth, "POST", f"/{DB}/_find",
                               {"selector": {"v": {"$regex": pattern}}, "fields": ["_id"], "limit": 1000})
        if status == 200:
            out.append({"pattern": pattern, "matches": sorted(int(d["_id"][1:]) for d in body["docs"])})
        else:
            out.append({"pattern": pattern, "status": status, "error": (body or {}).get("error")})
    request(base, auth, "DELETE", f"/{DB}")
    return out


def main():
    patterns = PATTERNS + generated(40, 300)
    couch = answers(couch_url(), patterns)
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        other = answers(sys.argv[2], patterns)
        differ = 0
        for theirs, ours in zip(couch, other):
            if theirs != ours:
                differ += 1
                print(json.dumps(theirs, ensure_ascii=False), "\n   ", json.dumps(ours, ensure_ascii=False))
        print(f"{differ} of {len(patterns)} answers differ")
        return
    with open(OUT, "w") as out:
        json.dump({"recorded_from": "Apache CouchDB 3.4.3", "database": DB, "subjects": SUBJECTS, "cases": couch},
                  out, ensure_ascii=False, indent=1)
        out.write("\n")
    errors = sum(1 for c in couch if "status" in c)
    print(f"wrote {OUT}: {len(couch)} patterns ({errors} refused) over {len(SUBJECTS)} subjects")


if __name__ == "__main__":
    main()
