public import CouchEngine
import CouchJSON
import CouchProtocol
public import CouchServer
public import Foundation
public import HTTPServing
public import Hummingbird
public import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The server's local control socket, `<data>/control.sock` (mode 0600): what only someone who
/// may use the data directory may ask, over HTTP on a Unix socket. The online backup
/// (`lt backup`), which must come from the server itself — it alone may open the databases
/// while it runs (users' databases are opened without file locks) —, and what `lt doctor`
/// reads from a running server without an admin's password (the file's mode is the check):
///
///     GET  /backup/databases         ["_users", "lt_places", …]
///     GET  /backup/server.json       the server's settings file (admins' hashes, cookie secret)
///     GET  /backup/config.json       the runtime configuration's changes (404: none)
///     POST /backup/databases/{name}  a consistent snapshot of one database (SQLite file)
///     GET  /server{path}             the database API's answer to an admin's GET of one of `serverPaths`
public enum ControlSocket {
    /// The database API's read-only paths the socket answers as an admin: the welcome, the
    /// metrics, the replication scheduler's jobs and documents.
    public static let serverPaths = ["/", "/_node/_local/_prometheus", "/_scheduler/jobs", "/_scheduler/docs"]

    /// The socket's path in a data directory.
    public static func path(in directory: URL) -> String {
        directory.appendingPathComponent("control.sock").path
    }

    /// The socket's listener. A socket file left by a process that ended is removed first (the
    /// caller holds the directory's lock, so no running server owns it).
    static func service(directory: URL, store: DatabaseStore, api: CouchAPI, logger: Logger) throws -> some Service {
        let path = path(in: directory)
        // sun_path holds 107 bytes and a NUL.
        guard path.utf8.count < 108 else {
            throw ServerStartFailure(
                "the data directory's path is too long for its control socket (\(path)): use a shorter --data")
        }
        try? FileManager.default.removeItem(atPath: path)
        return Application(
            router: router(directory: directory, store: store, api: api, logger: logger),
            configuration: .init(address: .unixDomainSocket(path: path), serverName: nil),
            onServerRunning: { _ in _ = chmod(path, 0o600) },
            logger: logger)
    }

    /// The socket's routes (public for the fuzz harness, which answers requests with them
    /// without a socket). Every failure is a CouchDB-style JSON error (`JSONErrors`).
    public static func router(
        directory: URL, store: DatabaseStore, api: CouchAPI, logger: Logger
    ) -> Router<ClientRequestContext> {
        let router = Router(context: ClientRequestContext.self)
        router.add(middleware: JSONErrors())
        let local = InProcessCouch(api: api)
        for path in serverPaths {
            router.get(RouterPath(path == "/" ? "/server" : "/server" + path)) { _, _ in
                let reply = try await local.request(.get, path, query: [:], body: nil)
                let type = path.hasSuffix("_prometheus") ? "text/plain; version=0.0.4" : "application/json"
                return Response(
                    status: .init(code: reply.status), headers: [.contentType: type],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: reply.body)))
            }
        }
        router.get("/backup/databases") { _, _ in
            let names = try await store.allNamesOffThread()
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSON.array(names.map(JSON.string)).bytes)))
        }
        router.get("/backup/server.json") { _, _ in
            let data = try Data(contentsOf: directory.appendingPathComponent("server.json"))
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.get("/backup/config.json") { _, _ in
            // 404 while nothing was changed through /_node/_local/_config.
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent("config.json").path)
            else {
                return Response(status: .notFound)
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.post("/backup/databases/:name") { _, context in
            let name = context.parameters.get("name")?.removingPercentEncoding ?? ""
            guard store.exists(name) else {
                throw CouchError(status: 404, error: "not_found", reason: "no database \(name)")
            }
            let started = ContinuousClock.now
            let file = try await store.snapshot(of: name)
            let stream = try SnapshotStream(file)
            logger.debug("backup: snapshot of \(name) (\(stream.size) bytes) in \(started.duration(to: .now))")
            return Response(
                status: .ok, headers: [.contentType: "application/vnd.sqlite3", .contentLength: String(stream.size)],
                body: ResponseBody(contentLength: stream.size) { writer in try await stream.write(to: &writer) })
        }
        return router
    }
}

/// A snapshot file sent and gone: unlinked once open (the open descriptor keeps its bytes
/// until closed, so nothing is left behind however the transfer ends), read off the event
/// loops a megabyte at a time.
final class SnapshotStream: @unchecked Sendable {
    private let handle: FileHandle
    let size: Int

    init(_ file: URL) throws {
        handle = try FileHandle(forReadingFrom: file)
        size = Int((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue ?? 0)
        try? FileManager.default.removeItem(at: file)
    }

    deinit { try? handle.close() }

    func write(to writer: inout any ResponseBodyWriter) async throws {
        while true {
            let chunk = try await NIOThreadPool.singleton.runIfActive { [handle] in
                try handle.read(upToCount: 1 << 20) ?? Data()
            }
            if chunk.isEmpty { break }
            try await writer.write(ByteBuffer(bytes: chunk))
        }
        try await writer.finish(nil)
    }
}
