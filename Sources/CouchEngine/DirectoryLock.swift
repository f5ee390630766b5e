#if canImport(Glibc)
import CouchJSON
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation

/// Claims a data directory for this process (`flock` on `<directory>/.lock`), so a second
/// process cannot use it at the same time. Users' single-connection databases are opened
/// without SQLite file locks (see `Connections.single`): two processes writing one of them
/// would corrupt it, so whatever opens a whole data directory — `lt serve`, `lt replicate`
/// with a local path, the benchmarks — holds this first. Released when the lock is released
/// or the process ends (also by `kill -9`).
public final class DirectoryLock: Sendable {
    public let path: String
    private let descriptor: Int32

    /// Takes the lock, or throws `CouchError` 412 naming the directory when another process
    /// (or another lock in this one) holds it.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent(".lock").path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw CouchError(
                status: 500, error: "file_error", reason: "Cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw CouchError(
                status: 412, error: "directory_in_use",
                reason:
                    "\(directory.path) is in use by another lt process (lt serve?); stop it, or reach its databases over HTTP"
            )
        }
        descriptor = fd
    }

    deinit { close(descriptor) }
}
