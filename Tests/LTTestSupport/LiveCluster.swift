import Foundation

/// A real three-node Apache CouchDB cluster beside lt, as `scripts/couchdb-cluster.sh start`
/// makes one (docs/scaling.md): `LT_TEST_COUCHDB_CLUSTER` (the three nodes' URLs with the admin's
/// credentials, separated by commas), `LT_TEST_COUCHDB_CLUSTER_PROXY` (HAProxy in front of them)
/// and `LT_TEST_COUCHDB_CLUSTER_DIR` (the directory the script made, so a test can kill, block,
/// wipe and restart nodes through the same script).
public enum LiveCluster {
    static let environment = ProcessInfo.processInfo.environment
    /// Each node's URL with the admin's credentials.
    public static let nodes = (environment["LT_TEST_COUCHDB_CLUSTER"] ?? "").split(separator: ",").map(String.init)
    /// HAProxy in front of the nodes, with the admin's credentials.
    public static let proxy = environment["LT_TEST_COUCHDB_CLUSTER_PROXY"] ?? ""
    public static let directory = environment["LT_TEST_COUCHDB_CLUSTER_DIR"] ?? ""
    public static var isSet: Bool { nodes.count == 3 && !proxy.isEmpty && !directory.isEmpty }

    /// The cluster's admin, from the first node's URL.
    public static var admin: (String, String) {
        let url = URLComponents(string: nodes.first ?? "")
        return (url?.user ?? "", url?.password ?? "")
    }

    /// `url` without its credentials (`scheme://host:port`).
    public static func withoutCredentials(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.user = nil
        components.password = nil
        return components.string ?? url
    }

    /// Runs `scripts/couchdb-cluster.sh ACTION DIR NODE` (kill, restart, wipe, block, unblock).
    public static func control(_ action: String, node: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [Repository.root.appendingPathComponent("scripts/couchdb-cluster.sh").path, action, directory, "\(node)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ControlFailed(action: action, node: node, status: process.terminationStatus) }
    }

    public struct ControlFailed: Error, CustomStringConvertible {
        let action: String, node: Int, status: Int32
        public var description: String { "scripts/couchdb-cluster.sh \(action) node \(node) exited \(status)" }
    }
}
