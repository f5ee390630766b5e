#!/usr/bin/env python3
"""Writes a ZIP archive with Python's zipfile, for the importer's tests: an archive made by an
independent writer, in the two ways zippers write them.

usage: make_zip.py MODE OUT ENTRY...
  MODE   seekable: sizes in each entry's header (as zip and most tools write files);
         stream: sizes after each entry's data (data descriptors, as streaming zippers and
         downloads built on the fly write them)
  ENTRY  NAME=PATH (deflated), stored:NAME=PATH (no compression), zip64:NAME=PATH (ZIP64
         sizes), or NAME/ for a directory
"""
import io
import sys
import zipfile


class Unseekable(io.RawIOBase):
    """A file that cannot seek: zipfile then writes sizes after the data."""

    def __init__(self, file):
        self.file = file

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, data):
        return self.file.write(data)


def main():
    mode, out, entries = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(out, "wb") as raw:
        target = Unseekable(raw) if mode == "stream" else raw
        with zipfile.ZipFile(target, "w") as archive:
            for entry in entries:
                if entry.endswith("/"):
                    archive.writestr(zipfile.ZipInfo(entry), b"")
                    continue
                kind, _, rest = entry.rpartition(":") if ":" in entry.split("=")[0] else ("", "", entry)
                name, path = rest.split("=", 1)
                info = zipfile.ZipInfo(name, date_time=(2024, 6, 1, 12, 0, 0))
                info.compress_type = zipfile.ZIP_STORED if kind == "stored" else zipfile.ZIP_DEFLATED
                with open(path, "rb") as source, archive.open(info, "w", force_zip64=kind == "zip64") as sink:
                    while True:
                        block = source.read(1 << 16)
                        if not block:
                            break
                        sink.write(block)


if __name__ == "__main__":
    main()
