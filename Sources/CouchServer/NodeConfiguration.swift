import CouchEngine
import CouchJSON
import Foundation
import HTTPTypes

/// CouchDB's runtime configuration (`/_node/{node}/_config`): sections of string values,
/// read and changed while the server runs.
///
/// Values start from what the server was started with (`lt serve`'s flags and `--config`
/// file, shown under CouchDB's names: `[couchdb] max_document_size`, `[chttpd] port`, …).
/// Changes made through the API are kept in `<data>/config.json` (mode 0600) unless sent with
/// `X-Couch-Persist: false`, and win over the start values at the next start, as CouchDB's
/// `local.ini` wins over `default.ini`. A key lt has no use for is stored and answered as
/// CouchDB would; the keys lt applies while it runs are `live`, checked before they are
/// taken. Server admins are not kept here (see `ServerSettings`).
final class NodeConfiguration: Sendable {
    typealias Sections = [String: [String: String]]

    /// Sections CouchDB refuses to change over HTTP (its `BLACKLIST_CONFIG_SECTIONS`).
    static let protectedSections: Set<String> = [
        "daemons", "external", "httpd_design_handlers", "httpd_db_handlers", "native_query_servers", "os_daemons",
        "query_servers",
    ]

    /// The keys lt applies at run time, and what their values must be.
    static let live: [String: [String: Check]] = [
        "uuids": [
            "algorithm": .oneOf(UUIDGenerator.Algorithm.allCases.map(\.rawValue)),
            // It sizes every `_uuids` answer: bounded, as any client-driven allocation.
            "max_count": .positive(upTo: 100_000),
            "utc_id_suffix": .any,
        ],
        "couchdb": [
            "max_document_size": .positive(upTo: Int(Int32.max)), "max_partition_size": .count(upTo: 1 << 50),
            "maintenance_mode": .oneOf(["true", "false", "nolb"]),
        ],
        "chttpd": [
            "max_http_request_size": .positive(upTo: Int(Int32.max)),
            "decode_plus_to_space": .oneOf(["true", "false"]), "allow_jsonp": .oneOf(["true", "false"]),
            "x_forwarded_host": .headerName, "x_forwarded_proto": .headerName, "x_forwarded_ssl": .headerName,
            "rewrite_limit": .positive(upTo: 1000),
            "secure_rewrites": .oneOf(["true", "false"]),
        ],
        "chttpd_auth": ["timeout": .positive(upTo: 10 * 365 * 86_400), "authentication_db": .databaseName],
        "query_server_config": ["reduce_limit": .oneOf(["true", "false", "log"])],
        // The largest page of a `_geo` query (Cloudant's 200 unless raised): every hit is held
        // for the answer, so bounded.
        "geo": ["max_limit": .positive(upTo: 100_000)],
    ]

    enum Check: Sendable {
        case any
        case positive(upTo: Int)
        case oneOf([String])
        case databaseName
        case headerName
        /// 0 (off) or a positive integer up to the bound.
        case count(upTo: Int)

        /// Why `value` cannot be taken, or nil.
        func problem(_ value: String) -> String? {
            switch self {
            case .any: return nil
            case .positive(let most):
                return Int(value).map { (1...most).contains($0) } == true ? nil : "must be an integer from 1 to \(most)"
            case .oneOf(let allowed):
                return allowed.contains(value) ? nil : "must be one of " + allowed.joined(separator: ", ")
            case .count(let most):
                return Int(value).map { (0...most).contains($0) } == true ? nil : "must be an integer from 0 to \(most)"
            case .headerName: return HTTPField.Name(value) == nil ? "must be an HTTP header name" : nil
            case .databaseName: return DatabaseStore.isValidName(value) ? nil : "must be a database name"
            }
        }
    }

    /// The changes kept on disk: a value, or null for a key deleted.
    struct Overrides: Sendable, Equatable {
        var sections: [String: [String: String?]] = [:]

        static func read(_ url: URL) throws -> Overrides {
            guard let data = FileManager.default.contents(atPath: url.path) else { return Overrides() }
            guard let object = (try? JSON.parse(Array(data)))?.objectValue else {
                throw CouchError.corrupt(url.lastPathComponent)
            }
            var overrides = Overrides()
            for (section, keys) in object {
                guard let keys = keys.objectValue else { throw CouchError.corrupt(url.lastPathComponent) }
                for (key, value) in keys {
                    if value == .null {
                        overrides.sections[section, default: [:]][key] = .some(nil)
                    } else if let text = value.stringValue {
                        overrides.sections[section, default: [:]][key] = text
                    } else {
                        throw CouchError.corrupt(url.lastPathComponent)
                    }
                }
            }
            return overrides
        }

        func applied(to sections: Sections) -> Sections {
            var result = sections
            for (section, keys) in self.sections {
                for (key, value) in keys {
                    result[section, default: [:]][key] = value
                    if result[section]?.isEmpty == true { result[section] = nil }
                }
            }
            return result
        }

        var json: JSON {
            var object = JSONObject()
            for (section, keys) in sections.sorted(by: { $0.key < $1.key }) {
                var members = JSONObject()
                for (key, value) in keys.sorted(by: { $0.key < $1.key }) {
                    members[key] = value.map(JSON.string) ?? .null
                }
                object[section] = .object(members)
            }
            return .object(object)
        }
    }

    private struct State: Sendable {
        var values: Sections
        var overrides: Overrides
        var generator: UUIDGenerator
    }

    let defaults: Sections
    let file: URL?
    private let state: Locked<State>

    /// The configuration of a server started with `defaults`, with the changes kept in `file`
    /// (none when it is nil or missing; one that cannot be read is left alone and reported).
    init(defaults: Sections, file: URL?) {
        self.defaults = defaults
        self.file = file
        let overrides = (try? file.map(Overrides.read)) ?? Overrides()
        let values = overrides.applied(to: defaults)
        state = Locked(State(values: values, overrides: overrides, generator: Self.generator(values)))
    }

    /// Whether the kept changes can be read (checked before a server starts).
    static func check(_ file: URL) throws {
        _ = try Overrides.read(file)
    }

    /// The keys whose kept value differs from the start value (for the start-up log).
    var overridden: [(section: String, key: String, value: String?)] {
        state.withLock { state in
            state.overrides.sections.sorted { $0.key < $1.key }.flatMap { section, keys in
                keys.sorted { $0.key < $1.key }.compactMap { key, value in
                    defaults[section]?[key] == value ? nil : (section, key, value)
                }
            }
        }
    }

    var all: Sections { state.withLock { $0.values } }

    func section(_ name: String) -> [String: String] { state.withLock { $0.values[name] ?? [:] } }

    func value(_ section: String, _ key: String) -> String? { state.withLock { $0.values[section]?[key] } }

    /// An integer value, or `fallback` when it is missing or not one.
    func integer(_ section: String, _ key: String, default fallback: Int) -> Int {
        value(section, key).flatMap { Int($0) } ?? fallback
    }

    /// Sets a value (kept on disk when `persist`); returns the one it replaces ("" if none).
    func set(_ section: String, _ key: String, to value: String, persist: Bool) throws -> String {
        try check(section, key, value)
        return try change(section, key, to: value, persist: persist) ?? ""
    }

    /// Deletes a value (kept on disk when `persist`); returns it, or nil when there was none.
    func delete(_ section: String, _ key: String, persist: Bool) throws -> String? {
        guard value(section, key) != nil else { return nil }
        try check(section, key, nil)
        return try change(section, key, to: nil, persist: persist)
    }

    /// Forgets the changes not kept on disk: the start values with the kept changes.
    func reload() throws {
        let overrides = try file.map(Overrides.read) ?? Overrides()
        state.withLock { state in
            state.overrides = overrides
            state.values = overrides.applied(to: defaults)
            state.generator = Self.generator(state.values)
        }
    }

    /// `count` new document ids by `[uuids] algorithm`.
    func newIDs(_ count: Int) -> [String] {
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        return state.withLock { state in
            (0..<count).map { _ in state.generator.next(microseconds: now, random: UUIDGenerator.systemRandom) }
        }
    }

    func newID() -> String { newIDs(1)[0] }

    private func check(_ section: String, _ key: String, _ value: String?) throws {
        if Self.protectedSections.contains(section) {
            throw CouchError(
                status: 403, error: "forbidden", reason: "Config section blacklisted for modification over HTTP API.")
        }
        guard let check = Self.live[section]?[key] else { return }
        guard let value else {
            // A live key deleted falls back to its start value, or to CouchDB's default.
            return
        }
        if let problem = check.problem(value) {
            throw CouchError.badRequest("[\(section)] \(key) \(problem); \"\(value)\" was not taken")
        }
    }

    private func change(_ section: String, _ key: String, to value: String?, persist: Bool) throws -> String? {
        try state.withLock { state -> String? in
            let old = state.values[section]?[key]
            if persist {
                var overrides = state.overrides
                overrides.sections[section, default: [:]][key] = .some(value)
                if let file { try Self.write(overrides, to: file) }
                state.overrides = overrides
            }
            state.values[section, default: [:]][key] = value
            if state.values[section]?.isEmpty == true { state.values[section] = nil }
            if section == "uuids" { state.generator = Self.generator(state.values) }
            return old
        }
    }

    private static func generator(_ values: Sections) -> UUIDGenerator {
        let algorithm = values["uuids"]?["algorithm"].flatMap(UUIDGenerator.Algorithm.init(rawValue:)) ?? .sequential
        return UUIDGenerator(
            algorithm, suffix: values["uuids"]?["utc_id_suffix"] ?? "", random: UUIDGenerator.systemRandom)
    }

    /// Writes the kept changes as `server.json` is written (owner-only, replaced whole).
    private static func write(_ overrides: Overrides, to url: URL) throws {
        try ServerSettings.writePrivately(Data(overrides.json.bytes), to: url)
    }
}
