public import CouchEngine
public import CouchJSON
import CouchProtocol

/// A replication described as JSON, in the shape of `POST /_replicate` bodies and
/// `_replicator` documents: `source`/`target` as URLs (credentials in the URL or as
/// `{"url", "auth": {"basic": {"username", "password"}}}`) or local database names,
/// `continuous`, `create_target`, `doc_ids`, `selector`, `filter` with `query_params`,
/// `since_seq`, `cancel`.
public struct ReplicationRequest: Sendable {
    public var source: any ReplicationEndpoint
    public var target: any ReplicationEndpoint
    public var options: ReplicationOptions
    public var cancel: Bool
    /// True when either side is a database in this process (server admins only).
    public var usesLocalEndpoints: Bool

    /// - Parameters:
    ///   - store: this server's databases, for local names; nil allows only URLs.
    ///   - user: whom the replication writes as into local databases (validation's `userCtx`).
    ///   - filters: runs filter functions on local sources.
    public init(
        json: JSONObject, store: DatabaseStore?, user: UserContext = .system, filters: FilterResolver? = nil
    ) throws {
        var local = false
        func endpoint(_ name: String) throws -> any ReplicationEndpoint {
            guard let spec = json[name] else {
                throw ReplicationError(.fatal, "Missing `\(name)` in the replication request")
            }
            var url: String
            var username: String?
            var password: String?
            switch spec {
            case let .string(text): url = text
            case let .object(object):
                guard let text = object["url"]?.stringValue else {
                    throw ReplicationError(.fatal, "`\(name)` needs a `url`")
                }
                url = text
                username = object["auth"]?["basic"]?["username"]?.stringValue
                password = object["auth"]?["basic"]?["password"]?.stringValue
            default: throw ReplicationError(.fatal, "`\(name)` must be a URL or an object with a `url`")
            }
            if url.hasPrefix("http://") || url.hasPrefix("https://") {
                return try RemoteEndpoint(url: url, username: username, password: password)
            }
            guard let store else { throw ReplicationError(.fatal, "`\(name)` must be an http(s) URL") }
            guard DatabaseStore.isValidName(url) else {
                throw ReplicationError(.fatal, "`\(name)` is neither a URL nor a database name: \(url)")
            }
            local = true
            return LocalEndpoint(store: store, name: url, user: user, filters: filters)
        }
        source = try endpoint("source")
        target = try endpoint("target")
        usesLocalEndpoints = local
        var options = ReplicationOptions()
        options.continuous = json["continuous"] == .bool(true)
        options.createTarget = json["create_target"] == .bool(true)
        if let ids = json["doc_ids"], !ids.isNull {
            guard case let .array(list) = ids, list.allSatisfy({ $0.stringValue != nil }) else {
                throw ReplicationError(.fatal, "`doc_ids` must be an array of strings")
            }
            // As CouchDB: ids are URL-decoded (`_design%2Ffoo` is `_design/foo`).
            options.filter = .docIDs(
                list.compactMap(\.stringValue).map { CouchURL.decode(Substring($0), plusAsSpace: false) })
        }
        if let selector = json["selector"], !selector.isNull {
            guard case .object = selector else { throw ReplicationError(.fatal, "`selector` must be an object") }
            do { _ = try Selector(json: selector) } catch {
                throw ReplicationError(.fatal, "Invalid selector: \(error.reason)")
            }
            options.filter = .selector(selector)
        }
        if let filter = json["filter"], !filter.isNull {
            guard let name = filter.stringValue else {
                throw ReplicationError(.fatal, "`filter` must be a string (ddoc/name or _view)")
            }
            var queryParams = JSONObject()
            if let params = json["query_params"], !params.isNull {
                guard case let .object(object) = params else {
                    throw ReplicationError(.fatal, "`query_params` must be an object")
                }
                queryParams = object
            }
            _ = try ReplicationFilter.designPath(name, queryParams)
            options.filter = .function(name: name, queryParams: queryParams)
        }
        if let batch = json["worker_batch_size"]?.intValue, batch > 0 { options.batchSize = batch }
        if let since = json["since_seq"], !since.isNull {
            guard since.stringValue != nil || since.intValue != nil else {
                throw ReplicationError(.fatal, "`since_seq` must be a sequence")
            }
            options.sinceSeq = since
        }
        self.options = options
        cancel = json["cancel"] == .bool(true)
    }
}
