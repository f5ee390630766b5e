import CouchJSON
import Foundation
import HistoryImport
import LTTestSupport
import Testing

/// ZIP archives (a Google Takeout download, a folder zipped) written by an independent writer,
/// Python's `zipfile` (`Reference/make_zip.py`), both ways zippers write them: each entry that
/// is a location history gives the locations its unzipped file gives, whatever the pieces the
/// archive arrives in; the rest is passed over and counted; damage is a clear error.
@Suite("ZIP archives")
struct ZipArchiveTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Reference/make_zip.py")

    /// An entry for `make_zip.py`: `kind:` (stored, zip64) or none, a name, and its bytes (nil: a directory).
    struct Member {
        var spec: String
        var bytes: [UInt8]?
    }

    static func makeZip(_ mode: String, _ members: [Member]) throws -> [UInt8] {
        let directory = try TemporaryDirectory("lt-zip")
        defer { directory.cleanup() }
        var arguments = [script.path, mode, directory.url.appendingPathComponent("out.zip").path]
        for (index, member) in members.enumerated() {
            guard let bytes = member.bytes else {
                arguments.append(member.spec)
                continue
            }
            let path = directory.url.appendingPathComponent("member\(index)")
            try Data(bytes).write(to: path)
            arguments.append("\(member.spec)=\(path.path)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return Array(try Data(contentsOf: directory.url.appendingPathComponent("out.zip")))
    }

    /// Our reading of a file, fed in random pieces.
    static func read(
        _ bytes: [UInt8], rng: inout SeededRandom, format: HistoryFormat? = nil
    ) throws -> (
        [(ImportedLocation, HistoryFormat)], HistoryFile
    ) {
        var file = HistoryFile(format: format)
        var out: [(ImportedLocation, HistoryFormat)] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...70_000, using: &rng))
            try bytes[start..<end].withUnsafeBytes { try file.feed($0) { out.append(($0, $1)) } }
            start = end
        }
        try file.finish { out.append(($0, $1)) }
        #expect(file.bytesRead == bytes.count)
        return (out, file)
    }

    /// A member's locations read from its own bytes, as an unzipped file.
    static func plain(_ bytes: [UInt8], _ format: HistoryFormat) throws -> [ImportedLocation] {
        var reader = HistoryReader(format: format)
        var out: [ImportedLocation] = []
        try reader.feed(bytes) { out.append($0) }
        try reader.finish { out.append($0) }
        return out
    }

    @Test(
        "A Takeout-like archive, sizes before or after each entry: every history entry's locations as its unzipped file gives them; the rest passed over",
        arguments: ["seekable", "stream"], 0..<2)
    func takeoutArchive(mode: String, seed: Int) throws {
        var files = HistoryFiles(seed: 700 + seed)
        var histories: [(name: String, format: HistoryFormat, bytes: [UInt8])] = []
        for (name, format) in [
            ("Takeout/Location History/Records.json", HistoryFormat.googleRecords),
            ("Takeout/Location History/Semantic Location History/2024/2024_JUNE.json", .googleSemantic),
            ("Takeout/Tracks/ride.gpx", .gpx),
            ("exports/phone.csv", .csv),
            ("Takeout/Location History/Timeline.json", .androidTimeline),
        ] {
            let points = files.points(Int.random(in: 50...400, using: &files.rng))
            histories.append((name, format, files.file(format, points).bytes))
        }
        let settings = Array(#"{"createdTime":"2024-06-01T00:00:00Z","deviceSettings":[]}"#.utf8)
        let page = Array(
            "<!DOCTYPE html><html><body>\(String(repeating: "Takeout ", count: 20_000))</body></html>".utf8)
        var members: [Member] = [
            Member(spec: "Takeout/", bytes: nil),
            Member(spec: "Takeout/archive_browser.html", bytes: page),
            Member(spec: histories[0].name, bytes: histories[0].bytes),
            Member(spec: "Takeout/Location History/Settings.json", bytes: settings),
            Member(spec: histories[1].name, bytes: histories[1].bytes),
            Member(spec: "zip64:" + histories[2].name, bytes: histories[2].bytes),
            Member(spec: histories[3].name, bytes: histories[3].bytes),
        ]
        // A streaming zipper cannot store an entry uncompressed with its size after it (see `storedAfterData`).
        members.append(
            Member(spec: (mode == "seekable" ? "stored:" : "") + histories[4].name, bytes: histories[4].bytes))
        let archive = try Self.makeZip(mode, members)
        var rng = SeededRandom(seed: UInt64(seed))
        let (ours, file) = try Self.read(archive, rng: &rng)

        #expect(file.isArchive && file.format == nil)
        #expect(file.entries.map(\.name) == histories.map(\.name))
        #expect(file.entries.map(\.format) == histories.map(\.format))
        #expect(file.entries.allSatisfy { $0.error == nil })
        var expected: [(ImportedLocation, HistoryFormat)] = []
        for (index, history) in histories.enumerated() {
            let locations = try Self.plain(history.bytes, history.format)
            #expect(!locations.isEmpty)
            #expect(file.entries[index].locations == locations.count, "\(history.name)")
            expected += locations.map { ($0, history.format) }
        }
        #expect(ours.count == expected.count)
        for (mine, theirs) in zip(ours, expected) {
            #expect(mine.0 == theirs.0 && mine.1 == theirs.1)
        }
        #expect(file.skipped["archive entries that are not a location history"] == 2)
    }

    @Test(
        "Damage: an archive cut short, a corrupted entry, an entry that is not valid JSON; a plain file that is empty or unknown"
    )
    func damage() throws {
        var files = HistoryFiles(seed: 71)
        let records = files.file(.googleRecords, files.points(300)).bytes
        let gpx = files.file(.gpx, files.points(300)).bytes
        var broken = files.file(.googleSemantic, files.points(100)).bytes
        broken.removeLast(broken.count / 3)
        broken += Array("]]}}garbage".utf8)
        let archive = try Self.makeZip(
            "stream",
            [
                Member(spec: "a/Records.json", bytes: records), Member(spec: "b/2024_MAY.json", bytes: broken),
                Member(spec: "c/track.gpx", bytes: gpx),
            ])
        var rng = SeededRandom(seed: 3)

        // An entry that stops part way is listed with its error; the next entries are read.
        let (all, file) = try Self.read(archive, rng: &rng)
        #expect(file.entries.map(\.name) == ["a/Records.json", "b/2024_MAY.json", "c/track.gpx"])
        #expect(file.entries[0].error == nil && file.entries[2].error == nil)
        let error = try #require(file.entries[1].error)
        #expect(error.hasPrefix("b/2024_MAY.json: google-semantic: "), "\(error)")
        #expect(file.entries[1].locations > 0)
        #expect(file.skipped["archive entries that could not be read to their end"] == 1)
        #expect(all.count == 300 + file.entries[1].locations + 300)

        // Cut short: what came before is read, then a clear error (inside an entry, or after the
        // last entry and before the directory; a cut inside the directory loses nothing).
        let directory = try #require(Self.directoryOffset(archive))
        for cut in [archive.count / 2, directory] {
            var rng = SeededRandom(seed: UInt64(cut))
            var read = 0
            let failure = #expect(throws: HistoryReader.Failure.self) {
                var file = HistoryFile()
                try Array(archive.prefix(cut)).withUnsafeBytes { try file.feed($0) { _, _ in read += 1 } }
                try file.finish { _, _ in read += 1 }
            }
            #expect(failure?.reason.contains("cut short") == true, "\(String(describing: failure))")
            #expect(read >= 300)
            _ = rng.next()
        }

        // A byte changed inside the first entry's compressed data.
        var corrupted = archive
        corrupted[200] ^= 0x55
        let damaged = #expect(throws: HistoryReader.Failure.self) { _ = try Self.read(corrupted, rng: &rng) }
        #expect(damaged?.reason.contains("a/Records.json is damaged") == true, "\(String(describing: damaged))")

        // Not an archive, not a history.
        for (bytes, reason) in [
            ([UInt8](), "The file is empty"), (Array("hello there".utf8), "Not a location history"),
        ] {
            let refusal = #expect(throws: HistoryFile.Refusal.self) { _ = try Self.read(bytes, rng: &rng) }
            #expect(refusal?.reason.hasPrefix(reason) == true)
        }
    }

    /// Where the central directory starts: the end record's last field but one.
    static func directoryOffset(_ archive: [UInt8]) -> Int? {
        guard archive.count >= 22, archive[archive.count - 22..<archive.count - 18] == [0x50, 0x4B, 0x05, 0x06] else {
            return nil
        }
        let at = archive.count - 6
        return Int(archive[at]) | Int(archive[at + 1]) << 8 | Int(archive[at + 2]) << 16 | Int(archive[at + 3]) << 24
    }

    @Test("An entry stored uncompressed with its size after it cannot be read as a stream: the error says to unzip it")
    func storedAfterData() throws {
        let archive = try Self.makeZip("stream", [Member(spec: "stored:r.json", bytes: Array("{}".utf8))])
        var rng = SeededRandom(seed: 1)
        let failure = #expect(throws: HistoryReader.Failure.self) { _ = try Self.read(archive, rng: &rng) }
        #expect(failure?.description.contains("unzip the archive and import its folder") == true)
        #expect(failure?.description.hasPrefix("ZIP archive: The entry r.json") == true)
    }

    @Test("A format named by the uploader applies to every entry of an archive, those detection would pass over too")
    func forcedFormat() throws {
        let csv = Array("time,lat,lon\n2024-06-01T10:00:00Z,1.5,2.5\n2024-06-01T10:01:00Z,1.6,2.6\n".utf8)
        let members = [
            Member(spec: "one.txt", bytes: csv), Member(spec: "Settings.json", bytes: Array(#"{"a":[]}"#.utf8)),
            Member(spec: "two.txt", bytes: csv),
        ]
        let archive = try Self.makeZip("seekable", members)
        var rng = SeededRandom(seed: 2)
        let (detected, plain) = try Self.read(archive, rng: &rng)
        #expect(detected.count == 4 && plain.entries.map(\.name) == ["one.txt", "two.txt"])
        let (locations, file) = try Self.read(archive, rng: &rng, format: .csv)
        #expect(locations.count == 4 && file.entries.map(\.format) == [.csv, .csv, .csv])
        #expect(
            file.entries[1].error?.hasPrefix("Settings.json: csv: ") == true,
            "\(String(describing: file.entries[1].error))")
    }
}
