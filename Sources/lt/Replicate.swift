import ArgumentParser
import CommandSupport
import CouchEngine
import CouchJSON
import Foundation
import Logging
import Replication

/// `lt replicate`: one replication between URLs and local databases, with progress.
struct Replicate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replicate a database: push, pull or copy between URLs and local databases.",
        discussion: """
            SOURCE and TARGET are database URLs (http://user:password@host:5984/db) or local databases \
            given as DATA_DIR/NAME (for example ./lt-data/tracks, the layout `lt serve --data` uses). \
            Two-way sync is two runs with SOURCE and TARGET swapped. Interrupting a run (Ctrl-C) \
            checkpoints it; the next run resumes there.
            """)

    @Argument(help: "Database to read from: a URL or DATA_DIR/NAME.")
    var source: String

    @Argument(help: "Database to write to: a URL or DATA_DIR/NAME.")
    var target: String

    @Flag(help: "Keep following the source's changes until interrupted.")
    var continuous = false

    @Flag(name: .customLong("create-target"), help: "Create the target database if it does not exist.")
    var createTarget = false

    @Option(name: .customLong("doc-ids"), help: "Replicate only these comma-separated document ids.")
    var docIDs: String?

    @Option(help: "Replicate only documents matching this Mango selector (JSON).")
    var selector: String?

    @Flag(help: "Print the result as JSON instead of a summary.")
    var json = false

    @OptionGroup var trust: TrustOptions

    func validate() throws {
        if docIDs != nil, selector != nil { throw ValidationError("Use either --doc-ids or --selector, not both") }
        if let selector, (try? JSON.parse(selector))?.objectValue == nil {
            throw ValidationError("--selector must be a JSON object")
        }
    }

    func endpoint(
        _ spec: String, stores: inout [String: DatabaseStore], locks: inout [DirectoryLock]
    ) throws -> any ReplicationEndpoint {
        if spec.hasPrefix("http://") || spec.hasPrefix("https://") { return try RemoteEndpoint(url: spec) }
        let url = URL(fileURLWithPath: spec)
        let name = url.lastPathComponent
        let directory = url.deletingLastPathComponent().standardizedFileURL
        guard DatabaseStore.isValidName(name) else {
            throw ValidationError("\(name) is not a valid database name (in \(spec))")
        }
        if stores[directory.path] == nil {
            locks.append(try DirectoryLock.forCommand(directory))
        }
        let store = try stores[directory.path] ?? DatabaseStore(directory: directory)
        stores[directory.path] = store
        return LocalEndpoint(store: store, name: name)
    }

    func run() async throws {
        ProcessSetup.bootstrapLogging(level: .warning)
        try trust.apply()
        var stores: [String: DatabaseStore] = [:]
        var locks: [DirectoryLock] = []
        // Nothing left behind in a local directory but its databases (and its lock file).
        defer { for store in stores.values { store.removeScratchIfEmpty() } }
        defer { withExtendedLifetime(locks) {} }
        let sourceEndpoint = try endpoint(source, stores: &stores, locks: &locks)
        let targetEndpoint = try endpoint(target, stores: &stores, locks: &locks)
        var options = ReplicationOptions()
        options.continuous = continuous
        options.createTarget = createTarget
        if let docIDs {
            options.filter = .docIDs(docIDs.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        }
        if let selector { options.filter = .selector(try JSON.parse(selector)) }
        let replication = Replication(source: sourceEndpoint, target: targetEndpoint, options: options)

        let showProgress = isatty(STDERR_FILENO) == 1 && !json
        let progress = Task {
            for await status in replication.statusUpdates() where showProgress {
                Replicate.draw(status)
            }
        }
        let running = Task { try await replication.run() }
        // Ctrl-C stops the run cleanly: it checkpoints and reports what it did.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT)
        interrupt.setEventHandler { running.cancel() }
        interrupt.resume()
        defer { interrupt.cancel() }
        do {
            let result = try await running.value
            progress.cancel()
            if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
            if json {
                print(result.json.text)
            } else {
                let s = result.status
                print(
                    "\(sourceEndpoint.displayName) → \(targetEndpoint.displayName): \(s.missingChecked) revisions checked, "
                        + "\(s.docsRead) read, \(s.docsWritten) written, \(s.docWriteFailures) rejected; last sequence \(result.sourceLastSeq.text)"
                )
            }
            if result.status.docWriteFailures > 0 { throw ExitCode(2) }
        } catch let error as ReplicationError {
            progress.cancel()
            if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
            throw CommandFailure("replication failed: \(error.message)")
        }
    }

    /// One status line, redrawn in place: state, a bar when the source says what is pending.
    static func draw(_ status: ReplicationStatus) {
        var line = "\r\u{1B}[2K\(status.state.rawValue): \(status.docsWritten) written"
        if let pending = status.changesPending {
            let done = status.missingChecked
            let total = max(1, done + pending)
            let width = 30
            let filled = min(width, width * done / total)
            line +=
                " [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                + "] \(pending) pending"
        }
        if status.docWriteFailures > 0 { line += ", \(status.docWriteFailures) rejected" }
        if let error = status.error, status.state == .offline { line += " (retrying: \(error.prefix(60)))" }
        FileHandle.standardError.write(Data(line.utf8))
    }
}
