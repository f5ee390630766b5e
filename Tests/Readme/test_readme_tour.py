#!/usr/bin/env python3
"""The README's tour, run as it is written, twice in a row, against a fresh `lt serve`.

The README's shell blocks marked `<!-- tour -->` are read in order and cut into commands (a
command goes on over lines ending in `\\` or `|` and over open quotes). The tour's first command,
`swift run lt serve ...`, is done here: a fresh server on free ports with the same `--admin`, and
the tour's `127.0.0.1:5984`/`:8080` are changed to those ports. Every other command runs in one
bash (`set -e -o pipefail`) in a scratch directory where `data/` is the repository's, with
`swift run lt` meaning the built `lt` and `curl` checked:

- a command must succeed; a `curl` must answer below 400 unless its comment says the status
  (`# 412 ...`, `# 401 {...}`), and then exactly that;
- an answer shown in the comment (`# {...}`, `# 201 {...}`, on the command's line or the indented
  comment lines right after it) must be what the server sends, `…` standing for anything and
  whitespace ignored;
- the second run finds what the first made: a create may answer 409 or 412 instead, an `lt`
  command may fail saying "already", and nothing else may differ; at the end `tracks` and
  `lt_places` hold each document once (the 50 sample places by their ids, no copies).

Usage: test_readme_tour.py --lt PATH/TO/lt [--readme README.md] [--passes 2]
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Browser"))
import ltserve  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class Command:
    def __init__(self, line, text, comment):
        self.line = line          # README line number of its first line
        self.text = text          # the command as bash reads it (lines joined with newlines)
        self.comment = comment    # its comment text (trailing and indented lines after it)
        self.status, self.body = expectation(comment)

    @property
    def first_line(self):
        return self.text.split("\n", 1)[0]


def tour_blocks(readme):
    """(first line number, lines) of each ```sh block right after a `<!-- tour -->` line."""
    lines = readme.split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "<!-- tour -->":
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```sh"):
                raise SystemExit(f"README.md:{i + 1}: `<!-- tour -->` must be followed by a ```sh block")
            end = lines.index("```", i + 2)
            blocks.append((i + 3, lines[i + 2:end]))
    return blocks


def split_comment(line):
    """The line's code and its trailing comment (a `#` outside quotes after a space)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line, ""


def complete(text):
    """Whether bash would stop reading the command here: no open quote, no trailing \\ or |."""
    stripped = text.rstrip()
    if stripped.endswith("\\") or stripped.endswith("|") or stripped.endswith("&&"):
        return False
    try:
        shlex.split(text, comments=False)
        return True
    except ValueError:
        return False


def commands(first_line, lines):
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        start = i
        code, comment = split_comment(line)
        parts = [code]
        while not complete("\n".join(parts)):
            i += 1
            if i >= len(lines):
                raise SystemExit(f"README.md:{first_line + start}: the command never ends")
            code, comment = split_comment(lines[i])
            parts.append(code)
        comments = [comment] if comment else []
        # Indented comment lines right after the command are about it.
        while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and lines[i + 1].lstrip().startswith("#"):
            i += 1
            comments.append(lines[i].lstrip()[1:].strip())
        found.append(Command(first_line + start, "\n".join(parts), " ".join(comments)))
        i += 1
    return found


def balanced(text):
    """The JSON-like value at the start of text (up to its closing bracket), or None."""
    depth, quote = 0, False
    for i, c in enumerate(text):
        if quote:
            if c == "\\":
                continue
            if c == '"' and text[i - 1] != "\\":
                quote = False
        elif c == '"':
            quote = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return text[:i + 1]
    return None


def expectation(comment):
    """(status, body pattern) a comment promises: `412 ...`, `{...}`, `201 {...}`; None where it does not."""
    status = None
    match = re.match(r"(\d{3})\b[:\s]*(.*)", comment)
    if match:
        status, comment = int(match.group(1)), match.group(2)
    body = balanced(comment) if comment[:1] in "[{" else None
    return status, body


def matches(pattern, text):
    """`…` in the pattern stands for anything; whitespace is ignored on both sides."""
    squeeze = lambda s: re.sub(r"\s+", "", s)
    regex = ".*?".join(re.escape(part) for part in squeeze(pattern).split("…"))
    return re.fullmatch(regex, squeeze(text), re.S) is not None


PREAMBLE = r'''
__log_curl() { printf '%s\t%s\t%s\n' "$__LINE" "$1" "$2" >> "$TOUR_LOG"; }
curl() {
  local body status
  body=$(mktemp "$TOUR_TMP/body.XXXXXX")
  status=$(command curl -sS --max-time 60 -o "$body" -w '%{http_code}' "$@") || { echo "curl could not reach the server" >&2; return 1; }
  cat "$body"
  __log_curl "$status" "$body"
  if [ -n "$__EXPECT" ]; then
    [ "$status" = "$__EXPECT" ] && return 0
  elif [ "$status" -lt 400 ]; then
    return 0
  fi
  if [ "$TOUR_PASS" -gt 1 ] && { [ "$status" = 409 ] || [ "$status" = 412 ]; } && { [ -z "$__EXPECT" ] || [ "$__EXPECT" -lt 300 ]; }; then
    echo "(HTTP $status: the first run made it)" >&2
    return 0
  fi
  echo "README.md:$__LINE: HTTP $status${__EXPECT:+, the README says $__EXPECT}" >&2
  return 1
}
swift() {
  if [ "$1" = run ] && [ "$2" = lt ]; then
    shift 2
    local err rc=0
    err=$(mktemp "$TOUR_TMP/err.XXXXXX")
    "$LT_BINARY" "$@" 2> >(tee "$err" >&2) || rc=$?
    wait $! 2> /dev/null || true  # tee has written all of it
    if [ "$rc" -ne 0 ] && [ "$TOUR_PASS" -gt 1 ] && grep -q "already" "$err"; then
      echo "(exit $rc: the first run made it)" >&2
      return 0
    fi
    [ "$rc" -eq 0 ] || echo "README.md:$__LINE: lt $1 exited with $rc" >&2
    return "$rc"
  fi
  command swift "$@"
}
'''


def script(tour):
    out = [PREAMBLE]
    for command in tour:
        out.append(f"printf '\\n\\033[1m$ README.md:{command.line}  %s\\033[0m\\n' {shlex.quote(command.first_line)} >&2")
        out.append(f"__LINE={command.line}; __EXPECT={command.status or ''}")
        out.append(command.text)
    return "\n".join(out) + "\n"


def run_pass(tour, lt, scratch, pass_number):
    log = os.path.join(scratch, f"curl-{pass_number}.log")
    tmp = os.path.join(scratch, f"tmp-{pass_number}")
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(scratch, f"tour-{pass_number}.sh")
    with open(path, "w") as f:
        f.write(script(tour))
    environment = dict(os.environ, LT_BINARY=lt, TOUR_LOG=log, TOUR_TMP=tmp, TOUR_PASS=str(pass_number))
    started = time.monotonic()
    result = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", path], cwd=scratch, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    output = result.stdout
    if result.returncode != 0:
        tail = "\n".join(output.rstrip().split("\n")[-40:])
        raise SystemExit(f"README tour, run {pass_number}: stopped with exit {result.returncode}\n{tail}")
    answers = {}
    with open(log) as f:
        for row in f:
            line, status, body = row.rstrip("\n").split("\t")
            with open(body, errors="replace") as b:
                answers.setdefault(int(line), []).append((int(status), b.read()))
    return answers, output, time.monotonic() - started


def check_answers(tour, answers, pass_number, first_answers):
    problems = []
    for command in tour:
        if command.status is None and command.body is None:
            continue
        got = answers.get(command.line)
        if not got:
            problems.append(f"README.md:{command.line}: promises an answer ({command.comment}) but made no request")
            continue
        status, body = got[-1]
        if pass_number > 1 and first_answers.get(command.line, [(None, None)])[-1][0] != status and status in (409, 412):
            continue  # the first run made it; its answer was checked then
        if command.body is not None and not matches(command.body, body):
            problems.append(f"README.md:{command.line}: the README shows {command.body}\n    the server said {body.strip()[:600]}")
    return problems


def documents(server, admin, db):
    status, body = ltserve.request("GET", f"{server.db}/{db}/_all_docs", auth=admin)
    if status != 200:
        raise SystemExit(f"GET /{db}/_all_docs: {status} {body}")
    return [row["id"] for row in body["rows"]]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lt", required=True)
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--passes", type=int, default=2)
    arguments = parser.parse_args()
    lt = os.path.abspath(arguments.lt)

    with open(arguments.readme) as f:
        blocks = tour_blocks(f.read())
    if len(blocks) < 2:
        raise SystemExit(f"README.md: expected the tour's blocks (marked <!-- tour -->), found {len(blocks)}")
    tour = [command for first, lines in blocks for command in commands(first, lines)]
    serve = tour.pop(0)
    words = shlex.split(serve.text)
    if words[:3] != ["swift", "run", "lt"] or words[3:4] != ["serve"] or words[-1] != "&":
        raise SystemExit(f"README.md:{serve.line}: the tour must start the server (swift run lt serve ... &), not `{serve.text}`")
    options = words[4:-1]
    if len(options) != 2 or options[0] != "--admin" or ":" not in options[1]:
        raise SystemExit(f"README.md:{serve.line}: this test knows `lt serve --admin NAME:PASSWORD &`; the README has {options}")
    admin = tuple(options[1].split(":", 1))

    server = ltserve.LTServer(lt, admin)
    scratch = tempfile.mkdtemp(prefix="lt-readme-tour-")
    try:
        os.symlink(os.path.join(ROOT, "data"), os.path.join(scratch, "data"))
        for command in tour:
            for port, actual in (("5984", server.db_port), ("8080", server.app_port)):
                command.text = command.text.replace(f"127.0.0.1:{port}", f"127.0.0.1:{actual}")
                if command.body:
                    command.body = command.body.replace(f"127.0.0.1:{port}", f"127.0.0.1:{actual}")
        checked = sum(1 for c in tour if c.status is not None or c.body is not None)
        print(f"README tour: {len(tour) + 1} commands from {len(blocks)} blocks, {checked} with an answer to check; "
              f"server on :{server.db_port} and :{server.app_port}, scratch {scratch}", flush=True)
        problems = []
        first_answers = {}
        counts = []
        for pass_number in range(1, arguments.passes + 1):
            answers, output, seconds = run_pass(tour, lt, scratch, pass_number)
            if os.environ.get("TOUR_VERBOSE"):
                print(output)
            found = check_answers(tour, answers, pass_number, first_answers)
            problems += [f"run {pass_number}: {p}" for p in found]
            if pass_number == 1:
                first_answers = answers
            tracks, places = documents(server, admin, "tracks"), documents(server, admin, "lt_places")
            counts.append((len(tracks), len(places)))
            print(f"run {pass_number}: {len(tour)} commands in {seconds:.1f} s, {len(found)} answers unlike the README; "
                  f"tracks holds {len(tracks)} documents, lt_places {len(places)}", flush=True)

        # Each document once: the tour's own, the 50 sample places by their ids and the imported one.
        with open(os.path.join(ROOT, "data", "sample-places.json")) as f:
            sample = {place["_id"] for place in json.load(f)["places"]}
        places = [i for i in documents(server, admin, "lt_places") if not i.startswith("_design/") and i != "dataset-release"]
        if sorted(places) != sorted(sample | {"art-1"}):
            problems.append(f"lt_places holds {len(places)} places, not the 50 samples and art-1: "
                            f"extra {sorted(set(places) - sample - {'art-1'})[:5]}, missing {sorted(sample - set(places))[:5]}")
        tracks = documents(server, admin, "tracks")  # and _design/app, _design/geo, the _index's design document
        if [i for i in tracks if not i.startswith("_design/")] != ["fix-1", "fix-2", "fix-3"] or len(tracks) != 6:
            problems.append(f"tracks holds {tracks}")
        if len(set(counts)) != 1:
            problems.append(f"document counts changed between runs: {counts}")
        if problems:
            print("\n".join(problems))
            raise SystemExit(f"README tour: {len(problems)} problems")
        print(f"README tour: ok, {arguments.passes} runs on one fresh server")
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
