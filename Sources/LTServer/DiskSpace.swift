import CouchJSON
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The space of the file system a path is on (`statvfs`): what a server's data directory may
/// still grow into (`lt_data_free_bytes`, `lt doctor`).
public struct DiskSpace: Sendable, Equatable {
    /// Bytes an unprivileged process may still write.
    public var free: Int64
    /// The file system's size in bytes.
    public var total: Int64

    public init(free: Int64, total: Int64) {
        self.free = free
        self.total = total
    }

    /// The file system of `path`; nil when it cannot be asked (the path does not exist).
    public init?(of path: String) {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let block = Int64(clamping: stats.f_frsize)
        free = Int64(clamping: stats.f_bavail).multipliedSaturating(by: block)
        total = Int64(clamping: stats.f_blocks).multipliedSaturating(by: block)
    }
}
