import CouchJSON
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// This process's memory and open files, as Linux tells them (`/proc/self`); zeros elsewhere.
public struct ProcessStatistics: Sendable {
    /// Resident memory (VmRSS) and its anonymous part (RssAnon: the heap, not code or files), bytes.
    public var residentBytes = 0
    public var anonymousBytes = 0
    /// File descriptors open now, and the most this process may have.
    public var openFiles = 0
    public var maxFiles = 0

    /// The figures now.
    public static func current() -> ProcessStatistics {
        var statistics = ProcessStatistics()
        #if os(Linux)
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) {
            for line in status.split(separator: "\n") {
                let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard fields.count >= 2, let kilobytes = Int(fields[1]) else { continue }
                switch fields[0] {
                case "VmRSS:": statistics.residentBytes = kilobytes * 1024
                case "RssAnon:": statistics.anonymousBytes = kilobytes * 1024
                default: break
                }
            }
        }
        statistics.openFiles = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            statistics.maxFiles = Int(clamping: limit.rlim_cur)
        }
        #endif
        return statistics
    }
}

extension ServerMetrics {
    /// The process's figures, read with the other metrics.
    func addProcessCollector() {
        addCollector { [weak self] in
            guard let self else { return }
            let process = ProcessStatistics.current()
            gauge(HTTPMetric.residentMemory, [], Double(process.residentBytes))
            gauge(HTTPMetric.anonymousMemory, [], Double(process.anonymousBytes))
            gauge(HTTPMetric.openFileDescriptors, [], Double(process.openFiles))
            gauge(HTTPMetric.maxFileDescriptors, [], Double(process.maxFiles))
            gauge(HTTPMetric.uptime, [], started.duration(to: .now).seconds)
        }
    }
}
