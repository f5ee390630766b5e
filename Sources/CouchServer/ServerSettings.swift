import CouchEngine
import CouchJSON
public import CouchProtocol
public import Foundation

/// Node settings kept in `<data>/server.json`: the server's stable uuid (PouchDB derives
/// replication ids from it), server admins (hashed only) and the secret that signs session
/// cookies. Written with mode 0600.
public struct ServerSettings: Sendable {
    public var uuid: String
    public var admins: [String: Passwords.Hash]
    public var secret: String

    static func fileURL(in directory: URL) -> URL { directory.appendingPathComponent("server.json") }

    /// Loads the settings, creating them (new uuid and secret, no admins) on first start.
    public static func load(from directory: URL) throws -> ServerSettings {
        let url = fileURL(in: directory)
        guard let data = try? Data(contentsOf: url) else {
            return ServerSettings(uuid: Hex.random(bytes: 16), admins: [:], secret: Hex.random(bytes: 32))
        }
        let json = try JSON.parse(Array(data))
        var admins: [String: Passwords.Hash] = [:]
        for (name, value) in json["admins"]?.objectValue ?? JSONObject() {
            if let text = value.stringValue, let hash = Passwords.parseAdminString(text) { admins[name] = hash }
        }
        guard let uuid = json["uuid"]?.stringValue, let secret = json["secret"]?.stringValue else {
            throw CouchError.corrupt("server.json")
        }
        return ServerSettings(uuid: uuid, admins: admins, secret: secret)
    }

    public func save(to directory: URL) throws {
        var admins = JSONObject()
        for (name, hash) in self.admins.sorted(by: { $0.key < $1.key }) {
            admins[name] = .string(Passwords.adminString(hash))
        }
        let json: JSON = ["uuid": .string(uuid), "secret": .string(secret), "admins": .object(admins)]
        try Self.writePrivately(Data(json.bytes), to: ServerSettings.fileURL(in: directory))
    }

    /// Writes a file of the data directory readable by its owner only, replacing the old one
    /// whole: a new file, then rename(2), so a reader sees the old contents or the new.
    static func writePrivately(_ data: Data, to url: URL) throws {
        let temporary = url.appendingPathExtension("tmp")
        guard
            FileManager.default.createFile(
                atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw CouchError(status: 500, error: "file_error", reason: "Cannot write \(temporary.path)") }
        guard rename(temporary.path, url.path) == 0 else {
            throw CouchError(status: 500, error: "file_error", reason: "Cannot replace \(url.path)")
        }
    }
}
