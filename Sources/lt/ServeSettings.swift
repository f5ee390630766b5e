import ArgumentParser
import CommandSupport
import ConfigFile
import CouchJSON
import Foundation

/// Where `lt serve` takes each setting from, first found wins: its flag, its `LT_*`
/// environment variable, the configuration file (`--config`), its default. Each value taken is
/// remembered with where it came from, for `--print-config`.
final class ServeSettings {
    /// One setting: its key (the flag's name, and the file's key), its variable, what its
    /// value must be, and whether part of it is a secret.
    struct Setting {
        let key: String
        let variable: String?
        let kind: ConfigurationFile.Kind
        var secret: Secret = .none
    }

    enum Secret { case none, password, urlCredentials }

    enum Source: String { case flag, environment, file, `default` }

    /// Every setting of `lt serve`, in the order `--print-config` shows them.
    static let all: [Setting] = [
        Setting(key: "data", variable: "LT_DATA", kind: .string),
        Setting(key: "host", variable: "LT_HOST", kind: .string),
        Setting(key: "db-port", variable: "LT_DB_PORT", kind: .integer),
        Setting(key: "port", variable: "LT_PORT", kind: .integer),
        Setting(key: "admin", variable: "LT_ADMIN", kind: .string, secret: .password),
        Setting(key: "mode", variable: "LT_MODE", kind: .string),
        Setting(key: "couchdb", variable: "LT_COUCHDB_URL", kind: .string, secret: .urlCredentials),
        Setting(key: "device-couchdb", variable: "LT_DEVICE_COUCHDB_URL", kind: .string),
        Setting(key: "database-only", variable: "LT_DATABASE_ONLY", kind: .boolean),
        Setting(key: "durability", variable: "LT_DURABILITY", kind: .string),
        Setting(key: "max-open-databases", variable: "LT_MAX_OPEN_DATABASES", kind: .integer),
        Setting(key: "max-document-size", variable: "LT_MAX_DOCUMENT_SIZE", kind: .integer),
        Setting(key: "max-body-size", variable: "LT_MAX_BODY_SIZE", kind: .integer),
        Setting(key: "max-app-body-size", variable: "LT_MAX_APP_BODY_SIZE", kind: .integer),
        Setting(key: "request-timeout", variable: "LT_REQUEST_TIMEOUT", kind: .integer),
        Setting(key: "body-timeout", variable: "LT_BODY_TIMEOUT", kind: .integer),
        Setting(key: "body-deadline", variable: "LT_BODY_DEADLINE", kind: .integer),
        Setting(key: "max-connections", variable: "LT_MAX_CONNECTIONS", kind: .integer),
        Setting(key: "max-connections-per-address", variable: "LT_MAX_CONNECTIONS_PER_ADDRESS", kind: .integer),
        Setting(key: "max-feeds-per-user", variable: "LT_MAX_FEEDS_PER_USER", kind: .integer),
        Setting(key: "max-registrations-per-hour", variable: "LT_MAX_REGISTRATIONS_PER_HOUR", kind: .integer),
        Setting(key: "trusted-proxy", variable: "LT_TRUSTED_PROXIES", kind: .list),
        Setting(key: "cors-origins", variable: "LT_CORS_ORIGINS", kind: .list),
        Setting(key: "password-iterations", variable: "LT_PASSWORD_ITERATIONS", kind: .integer),
        Setting(key: "javascript", variable: "LT_JAVASCRIPT", kind: .onOff),
        Setting(key: "tls-cert", variable: "LT_TLS_CERT", kind: .string),
        Setting(key: "tls-key", variable: "LT_TLS_KEY", kind: .string),
        Setting(key: "ca-file", variable: "LT_CA_FILE", kind: .string),
        Setting(key: "log-level", variable: "LT_LOG_LEVEL", kind: .string),
        Setting(key: "log-format", variable: "LT_LOG_FORMAT", kind: .string),
        Setting(key: "access-log", variable: "LT_ACCESS_LOG", kind: .onOff),
        Setting(key: "tiles", variable: "LT_TILES", kind: .string),
        Setting(key: "tile-attribution", variable: "LT_TILE_ATTRIBUTION", kind: .string),
    ]
    static let byKey = Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0) })

    let environment: [String: String]
    let file: ConfigurationFile?
    /// The values taken so far, by key.
    private(set) var taken: [String: (value: String?, source: Source)] = [:]

    /// The settings of this process: its environment, and the file `--config` (or `LT_CONFIG`) names.
    init(configPath: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.environment = environment
        let path = configPath ?? environment["LT_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        do {
            file = try path.map { try ConfigurationFile(path: $0, keys: Self.byKey.mapValues(\.kind)) }
        } catch let failure as ConfigurationFile.Failure {
            throw CommandFailure(failure.description)
        }
        let holdsSecret =
            file.map {
                $0.values["admin"] != nil || $0.values["couchdb"].flatMap { URLComponents(string: $0)?.password } != nil
            } ?? false
        if let file, holdsSecret, file.readableByOthers {
            FileHandle.standardError.write(
                Data(
                    "lt: warning: \(file.path) holds a secret (admin or couchdb) and other users may read it: chmod 600 \(file.path)\n"
                        .utf8))
        }
    }

    /// The setting's value: the flag's, else the variable's (unless empty), else the file's, else `fallback`.
    func string(_ key: String, flag: String?, default fallback: String? = nil) -> String? {
        let setting = Self.byKey[key]!
        let found: (String, Source)? =
            if let flag {
                (flag, .flag)
            } else if let variable = setting.variable, let value = environment[variable], !value.isEmpty {
                (value, .environment)
            } else if let value = file?.values[key] { (value, .file) } else { fallback.map { ($0, .default) } }
        taken[key] = (found?.0, found?.1 ?? .default)
        return found?.0
    }

    /// An integer setting; a variable that is not one is an error naming it.
    func int(_ key: String, flag: Int?, default fallback: Int) throws -> Int {
        guard let text = string(key, flag: flag.map(String.init), default: String(fallback)) else { return fallback }
        guard let value = Int(text) else {
            throw ValidationError("\(Self.byKey[key]!.variable ?? key) must be an integer, not \(text)")
        }
        return value
    }

    /// A switch (`--database-only`): on when its flag is given, else as its variable or the file says.
    func bool(_ key: String, flag: Bool) throws -> Bool {
        let text = string(key, flag: flag ? "true" : nil, default: "false")
        switch text {
        case "true", "1", "yes", "on": return true
        case "false", "0", "no", "off", nil: return false
        case let other?:
            throw ValidationError("\(Self.byKey[key]!.variable ?? key) must be true or false, not \(other)")
        }
    }

    /// The settings taken, as a configuration file would give them, secrets masked, each with
    /// where it came from (`--print-config`).
    var printed: String {
        var lines = [
            "# lt serve: the effective configuration (flag > LT_* variable > \(file?.path ?? "configuration file") > default)"
        ]
        for setting in Self.all {
            guard let (value, source) = taken[setting.key] else { continue }
            guard let value else {
                lines.append("# \(setting.key): (not set)")
                continue
            }
            let shown = Self.masked(value, setting.secret)
            let text: String =
                switch setting.kind {
                case .integer, .boolean, .onOff: shown
                case .list:
                    "[" + shown.split(separator: ",").map { JSON.string(String($0)).text }.joined(separator: ", ") + "]"
                case .string: JSON.string(shown).text
                }
            lines.append("\(setting.key): \(text)  # \(source.rawValue)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `value` with its secret part replaced by `********`.
    static func masked(_ value: String, _ secret: Secret) -> String {
        switch secret {
        case .none: return value
        case .password:
            guard let colon = value.firstIndex(of: ":") else { return "********" }
            return value[..<colon] + ":********"
        case .urlCredentials:
            guard var components = URLComponents(string: value), components.password != nil else { return value }
            components.password = "********"
            return components.string ?? "********"
        }
    }
}
