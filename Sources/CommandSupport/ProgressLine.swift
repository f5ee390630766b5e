import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Progress of a long command on standard error: on a terminal one line redrawn in place
/// (`[########........]  52%  61/117 databases  80.3 MiB  lt_locations_user_bob`); otherwise (a
/// log, CI) a line at each tenth of the way, so logs stay short.
public final class ProgressLine: @unchecked Sendable {
    let what: String
    let total: Int
    let onTerminal = isatty(STDERR_FILENO) == 1
    private var lastTenth = -1

    /// `total` steps of `what` (plural: "databases").
    public init(total: Int, of what: String) {
        self.total = total
        self.what = what
    }

    /// `done` of the steps are done, `bytes` so far; `label`: the step under way.
    public func update(done: Int, bytes: Int64, label: String = "") {
        let fraction = total == 0 ? 1 : Double(done) / Double(total)
        let size = ProgressLine.size(bytes)
        update(
            fraction: fraction, line: "\(done)/\(total) \(what)  \(size)  \(label.prefix(40))",
            logLine: "\(done)/\(total) \(what), \(size)")
    }

    /// A fraction of the way done, and what to say of it: `line` on a terminal, `logLine`
    /// (at each tenth of the way) otherwise.
    public func update(fraction: Double, line text: String, logLine: String? = nil) {
        let fraction = min(1, max(0, fraction))
        if onTerminal {
            let width = 24
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let percent = String(Int(fraction * 100))
            let line = "\r[\(bar)] \(String(repeating: " ", count: 3 - percent.count))\(percent)%  \(text)"
            FileHandle.standardError.write(Data((line.padding(toLength: 110, withPad: " ", startingAt: 0)).utf8))
        } else {
            let tenth = Int(fraction * 10)
            guard tenth > lastTenth else { return }
            lastTenth = tenth
            FileHandle.standardError.write(Data("\(tenth * 10)%: \(logLine ?? text)\n".utf8))
        }
    }

    /// Ends the redrawn line.
    public func finish() {
        if onTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    /// Bytes for people: "812 bytes", "605 KiB", "7.3 MiB", "29 GiB" (a decimal below 10).
    public static func size(_ bytes: Int64) -> String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) bytes" : String(format: value < 10 ? "%.1f %@" : "%.0f %@", value, units[unit])
    }
}
