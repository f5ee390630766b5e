import Foundation
import Yams

/// A command's settings from a YAML file (`lt serve --config lt.yaml`): one key per option,
/// named as its flag without the dashes (`db-port: 5984`). Every key must be one the command
/// knows and every value of its kind; anything else is a `Failure` naming the file, the line
/// and the key, before anything starts.
public struct ConfigurationFile: Sendable {
    /// What a key's value must be.
    public enum Kind: Sendable {
        /// Any scalar, taken as its text (`host: 0.0.0.0`, `admin: "ops:secret"`).
        case string
        case integer
        /// `true` or `false`.
        case boolean
        /// `on` or `off` (YAML's `true`/`false`, `on`/`off`, `yes`/`no` too), as the flag takes it.
        case onOff
        /// A list of strings, or one string with commas (`trusted-proxy: [10.0.0.0/8]`).
        case list
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let path: String
    /// Whether users other than the owner may read the file (it should not, when it holds a secret).
    public var readableByOthers: Bool {
        let permissions = (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0
        return permissions & 0o044 != 0
    }
    /// The values, as the flags would take them: lists joined with commas, switches as on/off.
    public private(set) var values: [String: String] = [:]

    /// Reads and checks the file at `path` against `keys` (each setting's key and kind).
    public init(path: String, keys: [String: Kind]) throws {
        let text: String
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure(description: "cannot read the configuration file \(path): there is no such file")
        }
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            let why = FileManager.default.isReadableFile(atPath: path) ? "it is not UTF-8 text" : "permission denied"
            throw Failure(description: "cannot read the configuration file \(path): \(why)")
        }
        try self.init(text: text, path: path, keys: keys)
    }

    /// Checks `text`, the contents of the file at `path`, against `keys`.
    public init(text: String, path: String, keys: [String: Kind]) throws {
        self.path = path
        let root: Node?
        do { root = try Yams.compose(yaml: text) } catch {
            throw Failure(
                description:
                    "\(path) is not valid YAML: \(String(describing: error).trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        guard let root else { return }  // empty: no settings
        guard let mapping = root.mapping else {
            throw Failure(
                description:
                    "\(path)\(Self.line(root)): the configuration must be a mapping of settings (key: value), one per line"
            )
        }
        for (keyNode, value) in mapping {
            guard let key = keyNode.scalar?.string else {
                throw Failure(description: "\(path)\(Self.line(keyNode)): a key must be a setting's name")
            }
            guard let kind = keys[key] else {
                let near =
                    keys.keys.filter { Self.distance($0, key) <= 2 }.sorted().first.map { " (did you mean \($0)?)" }
                    ?? ""
                throw Failure(
                    description:
                        "\(path)\(Self.line(keyNode)): unknown setting \"\(key)\"\(near); the settings are \(keys.keys.sorted().joined(separator: ", "))"
                )
            }
            values[key] = try Self.text(of: value, kind, key: key, path: path)
        }
    }

    /// `value` as the flag would take it, if it is of `kind`.
    static func text(of value: Node, _ kind: Kind, key: String, path: String) throws -> String {
        func wrong(_ what: String) -> Failure {
            let shown = value.scalar.map { "\"\($0.string)\"" } ?? (value.sequence != nil ? "a list" : "a mapping")
            return Failure(description: "\(path)\(line(value)): \(key) must be \(what), not \(shown)")
        }
        switch kind {
        case .string:
            guard let scalar = value.scalar, value.null == nil else { throw wrong("a string") }
            return scalar.string
        case .integer:
            guard let number = value.int else { throw wrong("an integer") }
            return String(number)
        case .boolean:
            guard let flag = value.bool else { throw wrong("true or false") }
            return flag ? "true" : "false"
        case .onOff:
            if let flag = value.bool { return flag ? "on" : "off" }
            guard let word = value.scalar?.string, word == "on" || word == "off" else { throw wrong("on or off") }
            return word
        case .list:
            if let items = value.sequence {
                return try items.map { item in
                    guard let scalar = item.scalar else { throw wrong("a list of strings") }
                    return scalar.string
                }.joined(separator: ",")
            }
            guard let scalar = value.scalar, value.null == nil else { throw wrong("a list of strings") }
            return scalar.string
        }
    }

    /// ", line N" for a node that knows where it was.
    static func line(_ node: Node) -> String {
        node.mark.map { ", line \($0.line)" } ?? ""
    }

    /// Edit distance of two short keys, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }
}
