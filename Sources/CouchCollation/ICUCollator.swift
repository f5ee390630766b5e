import CICU

/// ICU's root collator, which Apache CouchDB's views and Mango use to order strings
/// (`couch_ejson_compare`: `ucol_open("")` with default attributes). Opened once; ICU allows
/// its const calls from any thread.
enum ICUCollator {
    /// The collator, or a stop with a clear message when ICU's data cannot be loaded (lt cannot
    /// order anything as CouchDB does without it).
    nonisolated(unsafe) static let root: UnsafeRawPointer = {
        guard let collator = lt_icu_root_collator() else {
            fatalError("ICU's root collator could not be opened: is libicu's data (libicudata) installed?")
        }
        return collator
    }()

    /// The version of the collator's rules and data ("153.112.31.32" for ICU 72): a sort key is
    /// only comparable with keys of the same version.
    static let version: String = {
        var buffer = [CChar](repeating: 0, count: 32)
        lt_icu_collator_version(root, &buffer, Int32(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// Appends the sort key of `string` (its bytes compare as the collator orders the strings;
    /// it ends with one 0 byte and holds no other). The UTF-16 text and the key are made in
    /// temporary buffers (an index build makes one per key).
    static func appendSortKey(_ string: String, to out: inout [UInt8]) {
        let count = string.utf16.count
        withUnsafeTemporaryAllocation(of: UInt16.self, capacity: max(count, 1)) { text in
            _ = text.initialize(from: string.utf16)
            var capacity = count * 3 + 16
            while true {
                let length = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { key -> Int in
                    let length = Int(
                        lt_icu_sort_key(root, text.baseAddress, Int32(count), key.baseAddress, Int32(capacity)))
                    if length > 0, length <= capacity {
                        out.append(contentsOf: UnsafeBufferPointer(rebasing: key[..<length]))
                    }
                    return length
                }
                if length <= 0 {
                    // ICU failed (it does not for valid UTF-16): order by the code units instead.
                    for unit in text.prefix(count) {
                        out.append(contentsOf: [UInt8(unit >> 8) | 1, UInt8(truncatingIfNeeded: unit) | 1])
                    }
                    out.append(0)
                    return
                }
                if length <= capacity { return }
                capacity = length
            }
        }
    }

    /// Compares two strings as the collator orders them: -1, 0 or 1.
    static func compare(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                if x.count == y.count, x.elementsEqual(y) { return 0 }
                var failed: Int32 = 0
                // ICU takes a null pointer only with a zero length, and Swift gives one for "".
                let empty: CChar = 0
                return withUnsafePointer(to: empty) { nothing in
                    x.withMemoryRebound(to: CChar.self) { xc in
                        y.withMemoryRebound(to: CChar.self) { yc in
                            Int(
                                lt_icu_compare_utf8(
                                    root, xc.baseAddress ?? nothing, Int32(xc.count), yc.baseAddress ?? nothing,
                                    Int32(yc.count), &failed))
                        }
                    }
                }
            }
        }
    }
}
