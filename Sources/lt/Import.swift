import ArgumentParser
import AsyncHTTPClient
import CommandSupport
import CouchJSON
import CouchProtocol
import Foundation
import HistoryImport
import NIOCore
import NIOHTTP1

/// `lt import`: bring a location history into a user's locations on a running server. Each
/// file is streamed to the application API (`POST /api/users/{name}/imports`), which reads it
/// as it arrives and answers when it is stored; ids come from user, time and position, so
/// importing again adds only what is missing.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import location history files (Google Takeout and Timeline exports, OwnTracks, GPX, GeoJSON, CSV).",
        discussion: """
            Formats are recognised by content: Google Takeout Records.json and Semantic Location History \
            (monthly files), the Timeline exports of Google Maps on Android (Timeline.json) and iOS \
            (location-history.json), OwnTracks JSON and Recorder .rec files, GPX, GeoJSON, and CSV with a header \
            naming latitude, longitude and time columns; and ZIP archives of them, such as a Takeout download \
            (read as they are sent; entries that are not location histories are passed over). A directory is \
            imported file by file (in name order). \
            Importing the same file twice, or exports that overlap, stores each location once; an import \
            interrupted half way completes when run again. Example: \
            lt import ~/Takeout/Location\\ History/Records.json --user amy --app http://admin:secret@127.0.0.1:8080
            """)

    @Argument(help: "Files or directories to import.")
    var paths: [String]

    @Option(help: "The user whose locations these are.")
    var user: String

    @Option(
        help:
            "The application API with a server admin's credentials, e.g. http://admin:secret@127.0.0.1:8080 (or LT_APP_URL)."
    )
    var app: String?

    @Option(help: "The format, when detection should not decide: \(formats).")
    var format: String?

    @Flag(help: "Read the files and report what would be stored; store nothing.")
    var dryRun = false

    @Flag(help: "Print one JSON summary instead of lines.")
    var json = false

    @Option(help: "CSV: the header of the latitude column.")
    var latColumn: String?
    @Option(help: "CSV: the header of the longitude column.")
    var lonColumn: String?
    @Option(help: "CSV: the header of the time column (ISO 8601, or seconds or milliseconds since 1970).")
    var timeColumn: String?

    static let formats = HistoryFormat.allCases.map(\.rawValue).joined(separator: ", ")

    func validate() throws {
        if let format, HistoryFormat(rawValue: format) == nil {
            throw ValidationError("--format must be one of \(Self.formats)")
        }
    }

    func run() async throws {
        let client = try AdminClient(app, environment: "LT_APP_URL")
        let files = try Self.files(paths)
        guard !files.isEmpty else { throw ValidationError("No files to import in \(paths.joined(separator: ", "))") }
        var results: [JSON] = []
        var failed = 0
        for file in files {
            let result = try await importFile(file, client: client)
            if result["state"] != "done" { failed += 1 }
            results.append(result)
            if !json { print(Self.summary(file.path, result)) }
        }
        if json {
            let totals: JSON = [
                "files": .int(results.count), "failed": .int(failed),
                "written": .int(results.compactMap { $0["written"]?.intValue }.reduce(0, +)),
                "duplicates": .int(results.compactMap { $0["duplicates"]?.intValue }.reduce(0, +)),
                "dry_run": .bool(dryRun),
            ]
            print(JSON.object(["imports": .array(results), "totals": totals]).text)
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// The files named: each file, and every file under each directory, in name order.
    static func files(_ paths: [String]) throws -> [URL] {
        var out: [URL] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw ValidationError("No such file or directory: \(path)")
            }
            let url = URL(fileURLWithPath: path)
            guard isDirectory.boolValue else {
                out.append(url)
                continue
            }
            let found =
                FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey])?
                .compactMap { $0 as? URL }
                .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
                .filter { !$0.lastPathComponent.hasPrefix(".") } ?? []
            out += found.sorted { $0.path < $1.path }
        }
        return out
    }

    /// Streams one file to the server, showing progress, and returns the server's summary (or
    /// the failure, as a summary with `state: failed`).
    func importFile(_ file: URL, client: AdminClient) async throws -> JSON {
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
        var query = ["name": file.lastPathComponent]
        if let format { query["format"] = format }
        if dryRun { query["dry_run"] = "true" }
        if let latColumn { query["lat_column"] = latColumn }
        if let lonColumn { query["lon_column"] = lonColumn }
        if let timeColumn { query["time_column"] = timeColumn }
        let target = "/api/users/\(CouchURL.encode(user))/imports" + CouchURL.query(query)
        let progress = json ? nil : ProgressLine(total: size, of: "bytes")
        let sent = SentBytes()
        let watcher = progress.map { line in
            Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    let running = try? await client.send(.GET, "/api/users/\(CouchURL.encode(user))/imports")
                    let job = running?["imports"]?.arrayValue?.first {
                        $0["state"] == "running" && $0["file_name"]?.stringValue == file.lastPathComponent
                    }
                    let done = sent.value
                    var text = "\(ProgressLine.size(Int64(done)))/\(ProgressLine.size(Int64(size)))"
                    if let job {
                        text +=
                            "  \(job["written"]?.intValue ?? 0) \(dryRun ? "new" : "written"), \(job["duplicates"]?.intValue ?? 0) already there"
                    }
                    guard !Task.isCancelled else { break }
                    line.update(
                        fraction: size == 0 ? 1 : Double(done) / Double(size),
                        line: text + "  \(file.lastPathComponent)")
                }
            }
        }
        // The progress line ends (its last redraw done) before the file's summary is printed.
        func endProgress() async {
            watcher?.cancel()
            _ = await watcher?.value
            progress?.finish()
        }
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let chunks = FileChunks(handle: handle, sent: sent)
        let body: ByteBuffer
        let response: HTTPClientResponse
        do {
            response = try await client.server.stream(
                .POST, target, fromServerRoot: true, requestBody: .stream(chunks, length: .known(Int64(size))),
                contentType: "application/octet-stream", deadline: .distantFuture)
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            await endProgress()
            throw error
        }
        await endProgress()
        let answer = (try? JSON.parse(Array(buffer: body))) ?? .null
        guard response.status == .ok || answer["state"] != nil else {
            return [
                "file_name": .string(file.lastPathComponent), "state": "failed",
                "error": .string(answer["reason"]?.stringValue ?? "the server answered \(response.status.code)"),
            ]
        }
        return answer
    }

    static func summary(_ path: String, _ result: JSON) -> String {
        let written = result["written"]?.intValue ?? 0
        let duplicates = result["duplicates"]?.intValue ?? 0
        let skipped = result["skipped"]?.objectValue?.members ?? []
        let entries = result["entries"]?.arrayValue ?? []
        let format = result["format"]?.stringValue ?? "?"
        var line =
            "\(path): \(format == "zip" ? "ZIP archive of \(entries.count) location file\(entries.count == 1 ? "" : "s")" : format), "
        line += result["dry_run"] == true ? "\(written) would be written" : "\(written) written"
        line += ", \(duplicates) already there"
        let skippedCount = skipped.compactMap { $0.value.intValue }.reduce(0, +)
        if skippedCount > 0 {
            line +=
                ", \(skippedCount) skipped ("
                + skipped.map { "\($0.value.intValue ?? 0) \($0.key)" }.joined(separator: "; ") + ")"
        }
        if let seconds = result["seconds"]?.doubleValue { line += String(format: " in %.1f s", seconds) }
        if result["state"] != "done" {
            line += " — \(result["state"]?.stringValue ?? "failed"): \(result["error"]?.stringValue ?? "")"
        }
        for entry in entries {
            line += "\n  \(entry["name"]?.stringValue ?? "?"): \(entry["format"]?.stringValue ?? "?"), "
            line += "\(entry["locations"]?.intValue ?? 0) locations"
            if let error = entry["error"]?.stringValue { line += " — not read to its end: \(error)" }
        }
        return line
    }
}

/// Bytes sent so far, read by the progress line.
final class SentBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func add(_ n: Int) { lock.withLock { count += n } }
}

/// A file as a sequence of 256 KiB pieces, read as they are asked for.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let handle: FileHandle
    let sent: SentBytes

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle
        let sent: SentBytes
        mutating func next() async throws -> ByteBuffer? {
            guard let data = try handle.read(upToCount: 256 << 10), !data.isEmpty else { return nil }
            sent.add(data.count)
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle, sent: sent) }
}
