// swift-tools-version: 6.1
import Foundation
import PackageDescription

// JavaScript (design-document functions) runs on Duktape from Debian's duktape-dev. Without
// it the package still builds; JavaScript requests then answer with a clear error.
let javascriptEngine = FileManager.default.fileExists(atPath: "/usr/include/duktape.h")

// jemalloc from Debian's libjemalloc-dev, when present, is `lt`'s allocator: a server opening and
// closing thousands of SQLite connections a second spent a fifth of its time in the C library's
// malloc and held a third more memory (docs/benchmarks.md, session 9). Without it, `lt` uses
// the C library's malloc and works the same, slower.
let jemalloc = FileManager.default.fileExists(atPath: "/usr/include/jemalloc/jemalloc.h")

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "LocationTracker",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "lt", targets: ["lt"]),
        .executable(name: "lt-bench", targets: ["lt-bench"]),
        .library(name: "CouchJSON", targets: ["CouchJSON"]),
        .library(name: "CouchEngine", targets: ["CouchEngine"]),
        .library(name: "CouchServer", targets: ["CouchServer"]),
        .library(name: "Replication", targets: ["Replication"]),
        .library(name: "Geo", targets: ["Geo"]),
        .library(name: "TrackerKit", targets: ["TrackerKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    ],
    targets: [
        // Ordered JSON values: parse, serialize, compare. No dependencies.
        .target(name: "CouchJSON", swiftSettings: strict),
        // ICU's root collator from Debian's libicu (libicu-dev), wrapped for Swift.
        .target(name: "CICU", linkerSettings: [.linkedLibrary("icui18n"), .linkedLibrary("icuuc")]),
        // CouchDB's orders of JSON values (ICU collation by default, Erlang's term order for
        // `raw`) and the byte keys that sort the same way in SQLite.
        .target(name: "CouchCollation", dependencies: ["CouchJSON", "CICU"], swiftSettings: strict),
        // Geometry: GeoJSON, WKT, distances on the sphere, spatial relations, the in-memory point index.
        .target(name: "Geo", dependencies: ["CouchJSON"], swiftSettings: strict),
        // A track turned into visits and trips (a day as people remember it): pure, no I/O.
        .target(name: "Timeline", dependencies: ["Geo"], swiftSettings: strict),
        // Rows put in order however many there are (a temporary SQLite file's external sort).
        .target(
            name: "ExternalSort",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        // Regular expressions in PCRE's syntax over bytes, matched in linear time (Mango's $regex).
        .target(name: "LinearRegex", swiftSettings: strict),
        // MIME multipart bodies (documents with attachment bodies, open_revs answers).
        .target(name: "MIMEMultipart", swiftSettings: strict),
        // JavaScript query server processes (CouchDB's query server protocol), and their client.
        .target(
            name: "JavaScript",
            dependencies: ["CouchJSON", "CouchCollation", "CouchEngine", "CouchIndexes", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // SQLite settings only C can reach (variadic functions).
        .target(name: "CSQLiteTuning", linkerSettings: [.linkedLibrary("sqlite3")]),
        // The document database engine on SQLite: revision trees, changes, attachments, the
        // secondary-index protocol. No HTTP.
        .target(
            name: "CouchEngine",
            dependencies: [
                "CouchJSON", "CouchCollation", "CSQLiteTuning", "LinearRegex",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // The secondary indexes kept from the changes feed: views, Mango, geo.
        .target(
            name: "CouchIndexes",
            dependencies: [
                "CouchJSON", "CouchCollation", "CouchEngine", "Geo",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // What a CouchDB client and server agree on: the CouchClient protocol and its HTTP
        // implementation, admin URLs, CouchDB's password hashes, shared-database id namespaces.
        .target(
            name: "CouchProtocol",
            dependencies: [
                "CouchJSON",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // What both HTTP listeners share: request context and client addresses behind proxies,
        // connection limits and timeouts, the failed-login throttle, TLS, the access log, metrics.
        .target(
            name: "HTTPServing",
            dependencies: [
                "CouchJSON",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        // The replicator: CouchDB's replication protocol between local databases and HTTP peers.
        .target(
            name: "Replication",
            dependencies: [
                "CouchJSON", "CouchEngine", "CouchProtocol", "MIMEMultipart",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The CouchDB 3 HTTP API over the engine: routing, auth, sessions, security.
        .target(
            name: "CouchServer",
            dependencies: [
                "CouchJSON", "CouchCollation", "CouchEngine", "CouchIndexes", "CouchProtocol", "HTTPServing", "Replication", "MIMEMultipart", "JavaScript", "Geo", "LinearRegex",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strict
        ),
        // TrackerKit, the device SDK: location filtering, the app's documents, the local store
        // replicating with the server (SyncManager), offline places. No UIKit; CoreLocation only
        // behind canImport.
        .target(
            name: "TrackerKit",
            dependencies: [
                "CouchJSON", "Geo", "CouchEngine", "CouchIndexes", "CouchProtocol", "Replication",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Location histories read from the files people hold them in (Google Takeout and phone
        // Timeline exports, OwnTracks, GPX, GeoJSON, CSV), as a stream: one location at a time.
        .target(
            name: "HistoryImport",
            dependencies: ["CouchJSON", "CZlib", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        // zlib from Debian's zlib1g-dev: inflates the entries of ZIP archives (Takeout downloads).
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        // The Location Tracker application (users, private databases, places, consolidation, the
        // dashboard) over the CouchDB API only: it never sees the engine or the server behind it.
        .target(
            name: "TrackerApp",
            dependencies: [
                "CouchJSON", "CouchProtocol", "HTTPServing", "Geo", "ExternalSort", "HistoryImport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Dashboard"), .copy("App")],
            swiftSettings: strict
        ),
        // The server composed: the database API and the application on two listeners, embedded
        // or in front of a CouchDB cluster (mirrors, purges). Only here do both meet.
        .target(
            name: "LTServer",
            dependencies: [
                "CouchJSON", "CouchEngine", "CouchProtocol", "CouchServer", "HTTPServing", "JavaScript", "Replication", "TrackerApp",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Settings from a YAML file (`lt serve --config`), every key and type checked.
        .target(name: "ConfigFile", dependencies: [.product(name: "Yams", package: "Yams")], swiftSettings: strict),
        // What the two executables share: process set-up (event loops, logging), the data
        // directory lock, the open-file budget, the JavaScript query server (`js-server`), shipped
        // data files, the allocator's name.
        .target(
            name: "CommandSupport",
            dependencies: [
                "CouchJSON", "CouchEngine", "CouchProtocol", "JavaScript", "TrackerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The benchmarks (database API, geo index, the application at scale, the device), each
        // against a baseline measured in the same run: `lt-bench`, apart from the `lt` users run.
        .executableTarget(
            name: "lt-bench",
            dependencies: [
                "CommandSupport", "CouchJSON", "CouchCollation", "CouchEngine", "CouchIndexes", "CouchProtocol", "CouchServer", "Geo", "JavaScript", "LinearRegex", "LTServer", "Replication", "TrackerApp", "TrackerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        // The command line: serve, backup, restore, device, replicate, places, users, status, analysis, import.
        .executableTarget(
            name: "lt",
            dependencies: [
                "HistoryImport",
                "CommandSupport", "ConfigFile", "CouchJSON", "CouchEngine", "CouchProtocol", "CouchServer", "Geo", "HTTPServing", "LTServer", "Replication", "TrackerApp", "TrackerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // libFuzzer harnesses for the parsers and both request handlers (scripts/fuzz.sh), and
        // lt-fuzz, their driver: built with -sanitize=fuzzer it fuzzes, built normally it
        // replays files (the tests replay the committed corpus).
        .target(
            name: "FuzzTargets",
            dependencies: [
                "HistoryImport",
                "CouchJSON", "CouchCollation", "CouchEngine", "CouchProtocol", "CouchServer", "ConfigFile", "Geo", "HTTPServing", "LinearRegex", "LTServer", "MIMEMultipart", "TrackerApp",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "lt-fuzz", dependencies: ["FuzzTargets"]),
        // Helpers shared by the test targets (deterministic random numbers for property tests).
        // What the test targets share: seeded random numbers, the `lt` binary, a real `lt serve`
        // on ephemeral ports (`TestServer`), a misbehaving proxy, the real CouchDB when given.
        .target(
            name: "LTTestSupport",
            dependencies: [
                "TrackerKit", "CouchJSON", "HistoryImport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/LTTestSupport", swiftSettings: strict),
        // Reads Package.swift and docs/ARCHITECTURE.md: every dependency is a documented one, one way.
        .testTarget(name: "ArchitectureTests", swiftSettings: strict),
        .testTarget(name: "CouchProtocolTests", dependencies: ["CouchProtocol", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "CouchJSONTests", dependencies: ["CouchJSON", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "CouchCollationTests", dependencies: ["CouchCollation", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        // Runs `lt js-server` processes: the lt executable must be built (swift test builds it).
        .testTarget(name: "JavaScriptTests", dependencies: ["JavaScript", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "ExternalSortTests", dependencies: ["ExternalSort", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "LinearRegexTests", dependencies: ["LinearRegex", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "HistoryImportTests", dependencies: ["HistoryImport", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "GeoTests", dependencies: ["Geo", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "TimelineTests", dependencies: ["Timeline", "Geo", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "MIMEMultipartTests", dependencies: ["MIMEMultipart", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "ConfigFileTests", dependencies: ["ConfigFile"], swiftSettings: strict),
        .testTarget(
            name: "LTServerTests",
            dependencies: [
                "LTServer", "CouchServer", "CouchEngine", "CouchJSON", "HTTPServing", "LTTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HTTPServingTests",
            dependencies: [
                "HTTPServing", "CouchJSON",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "TrackerKitTests", dependencies: ["TrackerKit", "CouchJSON", "CouchEngine", "Geo", "Replication", "LTTestSupport"], swiftSettings: strict),
        .testTarget(name: "CouchEngineTests", dependencies: ["CouchEngine", "CouchJSON", "LTTestSupport", .product(name: "GRDB", package: "GRDB.swift")], swiftSettings: strict),
        .testTarget(name: "CouchIndexesTests", dependencies: ["CouchIndexes", "CouchEngine", "CouchCollation", "CouchJSON", "Geo", "LTTestSupport", .product(name: "GRDB", package: "GRDB.swift")], swiftSettings: strict),
        .testTarget(name: "ReplicationTests", dependencies: ["Replication", "CouchEngine", "CouchJSON", "LTTestSupport"], swiftSettings: strict),
        // The application: unit tests over a CouchClient, and its API over a real `lt serve`
        // (embedded and in cluster mode).
        .testTarget(
            name: "TrackerAppTests",
            dependencies: [
                "TrackerApp", "CouchJSON", "CouchProtocol", "CouchEngine", "CouchServer", "JavaScript", "LTServer", "Geo", "Replication",
                "TrackerKit", "LTTestSupport", "lt",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // Whole-system scenarios: devices registering, driving and syncing through real servers,
        // kill -9 and restart, the command line's own reports.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "CommandSupport", "CouchJSON", "CouchEngine", "CouchProtocol", "CouchServer", "Geo", "HTTPServing", "HistoryImport", "LTServer", "TrackerKit", "LTTestSupport", "lt",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The CouchDB API over a real `lt serve`, against CouchDB's own answers and peers.
        .testTarget(
            name: "CouchServerTests",
            dependencies: [
                "CouchJSON", "CouchEngine", "CouchProtocol", "CouchServer", "HTTPServing", "LTServer", "Replication", "JavaScript", "LTTestSupport", "lt", "lt-fuzz", "TrackerApp", "TrackerKit", "MIMEMultipart",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ]
)

if javascriptEngine {
    package.targets.append(.systemLibrary(name: "CDuktape", path: "Sources/CDuktape", providers: [.apt(["duktape-dev"])]))
    package.targets.first { $0.name == "CommandSupport" }?.dependencies.append("CDuktape")
}

if jemalloc {
    package.targets.append(.systemLibrary(name: "CJemalloc", path: "Sources/CJemalloc", providers: [.apt(["libjemalloc-dev"])]))
    // Its settings (`malloc_conf`), a global jemalloc reads from the executable.
    package.targets.append(.target(name: "CJemallocSettings"))
    // Linked into both executables through CommandSupport (the allocator replaces malloc).
    package.targets.first { $0.name == "CommandSupport" }?.dependencies += ["CJemalloc", "CJemallocSettings"]
}

// Each source target has a README.md (one paragraph: what it is for, where to start): not a
// source or a resource.
for target in package.targets where target.type != .test && target.type != .system {
    if FileManager.default.fileExists(atPath: "\(Context.packageDirectory)/Sources/\(target.name)/README.md") {
        target.exclude.append("README.md")
    }
}
