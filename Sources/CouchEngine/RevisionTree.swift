import CouchJSON

/// A document's revision history as CouchDB keeps it: a forest of revisions, where replication
/// may add branches (conflicts) and stemming may cut old ancestors (leaving several roots).
///
/// Leaves are the revisions no other revision descends from. The winning revision is the leaf
/// that sorts highest by (not deleted, generation, hash), exactly as CouchDB's
/// `couch_doc:to_doc_info_path` and PouchDB's `winningRev` choose it, so every replica picks
/// the same winner without coordination.
public struct RevisionTree: Sendable, Equatable {
    public struct Node: Sendable, Equatable {
        public var rev: Revision
        /// Index of the parent node, or nil for a root (generation 1, or an ancestor stemmed away).
        public var parent: Int?
        public var deleted: Bool
    }

    public private(set) var nodes: [Node] = []

    public init() {}

    public var isEmpty: Bool { nodes.isEmpty }

    public func index(of rev: Revision) -> Int? { nodes.firstIndex { $0.rev == rev } }
    public func contains(_ rev: Revision) -> Bool { index(of: rev) != nil }
    public func node(_ rev: Revision) -> Node? { index(of: rev).map { nodes[$0] } }

    /// Indices of nodes that have no children.
    private var leafIndices: [Int] {
        var hasChild = [Bool](repeating: false, count: nodes.count)
        for node in nodes { if let p = node.parent { hasChild[p] = true } }
        return nodes.indices.filter { !hasChild[$0] }
    }

    public func isLeaf(_ rev: Revision) -> Bool {
        guard let i = index(of: rev) else { return false }
        return !nodes.contains { $0.parent == i }
    }

    /// All leaves, winner first, then in descending winner order.
    public var leaves: [Node] {
        leafIndices.map { nodes[$0] }.sorted(by: RevisionTree.winsOver)
    }

    /// The winning leaf: non-deleted first, then higher generation, then higher hash.
    public var winner: Node? { leaves.first }

    static func winsOver(_ a: Node, _ b: Node) -> Bool {
        if a.deleted != b.deleted { return !a.deleted }
        return a.rev > b.rev
    }

    /// The path from `rev` back to its oldest remembered ancestor, newest first.
    public func path(to rev: Revision) -> [Revision] {
        guard var i = index(of: rev) else { return [] }
        var path = [nodes[i].rev]
        while let p = nodes[i].parent {
            path.append(nodes[p].rev)
            i = p
        }
        return path
    }

    /// Adds a history path (newest first, consecutive generations) to the tree. Returns true
    /// when the newest revision was not in the tree before.
    @discardableResult
    public mutating func merge(path: [Revision], deleted: Bool) -> Bool {
        guard let newest = path.first else { return false }
        if let existing = index(of: newest) {
            // Known revision: we may still learn older ancestors that had been unknown.
            linkAncestors(of: existing, path: path)
            return false
        }
        // Find the newest ancestor in the path that we already have.
        var anchor: Int? = nil
        var anchorOffset = path.count
        for (offset, rev) in path.enumerated().dropFirst() {
            if let i = index(of: rev) {
                anchor = i
                anchorOffset = offset
                break
            }
        }
        // Without a shared ancestor the whole path becomes a new root branch. Insert oldest first.
        var parent = anchor
        for offset in stride(from: anchorOffset - 1, through: 0, by: -1) {
            let rev = path[offset]
            nodes.append(Node(rev: rev, parent: parent, deleted: offset == 0 ? deleted : false))
            parent = nodes.count - 1
        }
        return true
    }

    private mutating func linkAncestors(of index: Int, path: [Revision]) {
        var i = index
        var offset = 0
        while offset + 1 < path.count {
            if let p = nodes[i].parent {
                i = p
                offset += 1
                continue
            }
            // Root: attach the rest of the path above it.
            guard nodes[i].rev.pos > 1 else { return }
            let ancestor = path[offset + 1]
            if let existing = self.index(of: ancestor) {
                nodes[i].parent = existing
                i = existing
            } else {
                nodes.append(Node(rev: ancestor, parent: nil, deleted: false))
                nodes[i].parent = nodes.count - 1
                i = nodes.count - 1
            }
            offset += 1
        }
    }

    /// Keeps only revisions within `limit` generations of some leaf, as CouchDB's `stem`.
    /// Returns the revisions removed.
    @discardableResult
    public mutating func stem(limit: Int) -> [Revision] {
        guard limit > 0 else { return [] }
        var keep = [Bool](repeating: false, count: nodes.count)
        for leaf in leafIndices {
            var i: Int? = leaf
            var depth = 0
            while let current = i, depth < limit {
                keep[current] = true
                i = nodes[current].parent
                depth += 1
            }
        }
        guard keep.contains(false) else { return [] }
        return retain(keep)
    }

    /// Removes leaves (purge). Ancestors left without descendants that were not leaves before
    /// are removed too, as CouchDB's purge removes the whole unshared branch.
    @discardableResult
    public mutating func remove(leaves revs: [Revision]) -> [Revision] {
        var keep = [Bool](repeating: true, count: nodes.count)
        var childCount = [Int](repeating: 0, count: nodes.count)
        for node in nodes { if let p = node.parent { childCount[p] += 1 } }
        for rev in revs {
            guard var i = index(of: rev), childCount[i] == 0, keep[i] else { continue }
            keep[i] = false
            while let p = nodes[i].parent {
                childCount[p] -= 1
                guard childCount[p] == 0 else { break }
                keep[p] = false
                i = p
            }
        }
        return retain(keep)
    }

    private mutating func retain(_ keep: [Bool]) -> [Revision] {
        var newIndex = [Int?](repeating: nil, count: nodes.count)
        var kept: [Node] = []
        var removed: [Revision] = []
        for (i, node) in nodes.enumerated() {
            if keep[i] {
                newIndex[i] = kept.count
                kept.append(node)
            } else {
                removed.append(node.rev)
            }
        }
        for i in kept.indices {
            if let p = kept[i].parent { kept[i].parent = newIndex[p] }
        }
        nodes = kept
        return removed
    }

    /// Revisions from `revs` that the tree does not have.
    public func missing(_ revs: [Revision]) -> [Revision] {
        revs.filter { !contains($0) }
    }

    /// Leaves that could be ancestors of `rev` (lower generation), as `_revs_diff` reports them.
    public func possibleAncestors(of rev: Revision) -> [Revision] {
        leaves.map(\.rev).filter { $0.pos < rev.pos }
    }
}

extension RevisionTree {
    /// Compact storage form: `[[pos,"hash",parentIndex|-1,deleted0/1],...]`.
    public var encoded: String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, node) in nodes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            out.append(contentsOf: String(node.rev.pos).utf8)
            out.append(UInt8(ascii: ","))
            JSON.writeString(node.rev.hash, to: &out)
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: String(node.parent ?? -1).utf8)
            out.append(contentsOf: node.deleted ? ",1]".utf8 : ",0]".utf8)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// The form a `docs` row keeps: empty when the tree is its winner alone (one revision, no
    /// remembered ancestor: a document written once, most of a tracker's), which the row's
    /// `winner` and `deleted` columns already say; `encoded` otherwise. A location document so
    /// stores 44 bytes less, and reading it parses no JSON for its tree.
    public var stored: String {
        if nodes.count == 1, nodes[0].parent == nil { return "" }
        return encoded
    }

    /// Reads a `docs` row's tree: `stored`, with the row's winning revision and whether it is
    /// deleted for the tree that is its winner alone. Rows written before the elided form
    /// (always `encoded`) read the same.
    public init(stored: String, winner: String, deleted: Bool) throws {
        guard stored.isEmpty else {
            try self.init(encoded: stored)
            return
        }
        guard let rev = Revision(winner) else { throw CouchError.corrupt("revision tree") }
        self.init()
        nodes = [Node(rev: rev, parent: nil, deleted: deleted)]
    }

    /// Reads the storage form written by `encoded`.
    public init(encoded: String) throws {
        guard case let .array(items) = try JSON.parse(encoded) else { throw CouchError.corrupt("revision tree") }
        for item in items {
            guard case let .array(f) = item, f.count == 4, let pos = f[0].intValue, let hash = f[1].stringValue,
                let parent = f[2].intValue, let deleted = f[3].intValue
            else { throw CouchError.corrupt("revision tree") }
            nodes.append(
                Node(rev: Revision(pos: pos, hash: hash), parent: parent < 0 ? nil : parent, deleted: deleted == 1))
        }
    }
}
