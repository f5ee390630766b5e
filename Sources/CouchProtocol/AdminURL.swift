import CouchJSON
import Foundation

/// A CouchDB server's URL with a server admin's credentials, as cluster mode is given one:
/// `http(s)://ADMIN:PASSWORD@host[:port]`.
public struct AdminURL: Sendable {
    public let scheme: String
    /// `host:port`, the port filled in when the URL leaves it out.
    public let host: String
    /// `scheme://host:port`, without credentials.
    public var baseURL: String { "\(scheme)://\(host)" }
    /// The admin's `Authorization` header (basic).
    public let authorization: String

    /// 400 `bad_request` when the URL is not http(s) with a name and password.
    public init(_ url: String) throws(CouchError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme, ["http", "https"].contains(scheme),
              let hostname = components.host, let user = components.user, let password = components.password else {
            throw CouchError.badRequest("The CouchDB URL must look like http://ADMIN:PASSWORD@host:5984")
        }
        self.scheme = scheme
        host = "\(hostname):\(components.port ?? (scheme == "https" ? 443 : 80))"
        let name = user.removingPercentEncoding ?? user, secret = password.removingPercentEncoding ?? password
        authorization = "Basic " + Data("\(name):\(secret)".utf8).base64EncodedString()
    }
}
