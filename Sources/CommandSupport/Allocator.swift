import Foundation

#if canImport(CJemalloc)
import CJemalloc
import CJemallocSettings
#endif

/// The memory allocator `lt` runs on: jemalloc when it was built with Debian's
/// libjemalloc-dev present (see Package.swift), otherwise the C library's malloc.
public enum Allocator {
    /// For logs and benchmark reports, e.g. "jemalloc 5.3.0-0-g54eaed1d8b56 (background_thread:true,…)".
    public static var description: String {
        #if canImport(CJemalloc)
        if let version = lt_jemalloc_version() {
            let overridden = ProcessInfo.processInfo.environment["MALLOC_CONF"].map { ", MALLOC_CONF=\($0)" } ?? ""
            return "jemalloc \(String(cString: version)) (\(String(cString: lt_jemalloc_settings()))\(overridden))"
        }
        #endif
        return "the C library's malloc"
    }

    /// The allocator's own figures in bytes, by name (`allocated`, `active`, `resident`,
    /// `mapped`, `retained`); empty without jemalloc.
    public static func statistics() -> [(String, Int)] {
        #if canImport(CJemalloc)
        var (allocated, active, resident, mapped, retained) = (0, 0, 0, 0, 0)
        guard lt_jemalloc_stats(&allocated, &active, &resident, &mapped, &retained) == 0 else { return [] }
        return [
            ("allocated", allocated), ("active", active), ("resident", resident), ("mapped", mapped),
            ("retained", retained),
        ]
        #else
        return []
        #endif
    }
}
