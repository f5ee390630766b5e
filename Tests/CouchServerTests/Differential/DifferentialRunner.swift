import CouchJSON
import Foundation
import LTTestSupport
import NIOHTTP1

/// Sends a scenario's exchanges to a server, keeping the revisions it gave each document (a
/// later write names them as `"_rev": "REV"`), and puts answers in a form two servers can be
/// compared in (see `DifferentialComparison`).
struct DifferentialRunner {
    let server: TestServer
    /// nil: lt's own port; else another server (the real CouchDB).
    let base: String?
    /// By the id's bytes (Swift's String equality takes `é` and `e\u{301}` for one id).
    private var revisions: [[UInt8]: String] = [:]

    init(server: TestServer, base: String?) {
        self.server = server
        self.base = base
    }

    /// Sends one exchange; its status and JSON answer.
    mutating func send(_ exchange: Exchange) async throws -> (status: Int, answer: JSON) {
        var body = exchange.body
        if exchange.path.hasSuffix("/_bulk_docs"), let docs = body?["docs"]?.arrayValue {
            body = ["docs": .array(docs.map { doc in
                guard var object = doc.objectValue, object["_rev"] == "REV" else { return doc }
                object["_rev"] = revisions[Array((object["_id"]?.stringValue ?? "").utf8)].map(JSON.string) ?? .null
                if object["_rev"] == .null { object.removeValue(forKey: "_rev") }
                return .object(object)
            })]
        }
        let reply = try await server.request(HTTPMethod(rawValue: exchange.method), exchange.path, json: body, base: base)
        if exchange.path.hasSuffix("/_bulk_docs") {
            for row in reply.json.arrayValue ?? [] {
                if let id = row["id"]?.stringValue, let rev = row["rev"]?.stringValue { revisions[Array(id.utf8)] = rev }
            }
        }
        return (reply.status, reply.json)
    }
}

/// How two servers' answers to the same request are compared, with what may differ named:
/// - sequences (`update_seq`, `_changes`' `seq`/`last_seq`) are opaque and server-specific;
/// - revision hashes are compared by generation (the hash is each server's own digest);
/// - a 500's `ref` is CouchDB's log reference;
/// - `_sum`'s `caused_by` names the value CouchDB met first while reducing its b-tree's nodes;
/// - `_approx_count_distinct` is an estimate in CouchDB (HyperLogLog, precision 11): within 3%;
/// - Mango's `bookmark` is opaque;
/// - where CouchDB crashes (`"error": "{case_clause,…}"`), its `reason` is an Erlang stack trace;
/// - `_design_docs`' `offset`: CouchDB 3.4.3 answers a number unrelated to the rows' position
///   (3 for every query of a database with 3 design documents and 8 others);
/// - Mango's warning that many documents were examined per result: CouchDB's shard workers
///   read on after the coordinator has its rows (asynchronously), so its counts depend on
///   timing; lt stops at the limit. Other warnings are compared.
enum DifferentialComparison {
    static func normalized(_ answer: JSON, kind: Exchange.Kind, designDocs: Bool = false) -> JSON {
        var answer = strip(answer)
        guard case var .object(top) = answer else { return answer }
        top.removeValue(forKey: "ref")
        if top["error"]?.stringValue?.hasPrefix("{") == true { top.removeValue(forKey: "reason") }
        if top["update_seq"] != nil { top["update_seq"] = "<seq>" }
        switch kind {
        case .changes:
            if top["last_seq"] != nil { top["last_seq"] = "<seq>" }
            if let results = top["results"]?.arrayValue {
                top["results"] = .array(results.map { result in
                    guard case var .object(row) = result else { return result }
                    row.removeValue(forKey: "seq")
                    return .object(row)
                })
            }
        case .allDocs where top["offset"] != nil && (top["rows"]?.arrayValue ?? []).allSatisfy({ $0["id"]?.stringValue?.hasPrefix("_design/") == true }) && designDocs:
            top["offset"] = "<design docs offset>"
        case .find:
            top.removeValue(forKey: "bookmark")
            top.removeValue(forKey: "execution_stats")
            if let warning = top["warning"]?.stringValue {
                let others = warning.split(separator: "\n").filter { !$0.hasPrefix("The number of documents examined is high") }
                top["warning"] = others.isEmpty ? nil : .string(others.joined(separator: "\n"))
            }
        default:
            break
        }
        answer = .object(top)
        return answer
    }

    /// Revisions to their generation, `caused_by` dropped, at any depth.
    static func strip(_ value: JSON) -> JSON {
        switch value {
        case let .array(items): return .array(items.map(strip))
        case let .object(object):
            var out = JSONObject()
            let isReduceError = object["error"] == "builtin_reduce_error"
            for (key, member) in object.members {
                if isReduceError, key == "caused_by" { continue }
                if key == "rev" || key == "_rev", let rev = member.stringValue, let dash = rev.firstIndex(of: "-") {
                    out[key] = .string(String(rev[..<dash]) + "-…")
                } else {
                    out[key] = strip(member)
                }
            }
            return .object(out)
        default: return value
        }
    }

    /// Whether two normalized answers agree: equal JSON (numbers by value), or within 3% for
    /// the values of an approximate reduction.
    static func agree(_ a: JSON, _ b: JSON, kind: Exchange.Kind) -> Bool {
        if a == b { return true }
        guard kind == .approximate, let rowsA = a["rows"]?.arrayValue, let rowsB = b["rows"]?.arrayValue, rowsA.count == rowsB.count else { return false }
        for (x, y) in zip(rowsA, rowsB) {
            guard x["key"] == y["key"], let u = x["value"]?.doubleValue, let v = y["value"]?.doubleValue else { return false }
            if abs(u - v) > max(1, 0.03 * max(abs(u), abs(v))) { return false }
        }
        return true
    }

    /// One line describing a difference, answers shortened.
    static func describe(_ exchange: Exchange, expected: (Int, JSON), actual: (Int, JSON)) -> String {
        func short(_ value: JSON) -> String {
            let text = value.text
            return text.count > 600 ? String(text.prefix(600)) + "…" : text
        }
        let body = exchange.body.map { " " + short($0) } ?? ""
        return "\(exchange.method) \(exchange.path)\(body)\n  CouchDB \(expected.0) \(short(expected.1))\n  lt      \(actual.0) \(short(actual.1))"
    }
}
