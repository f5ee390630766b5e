import CouchEngine
import Testing

@Suite("Revision trees")
struct RevisionTreeTests {
    /// Random histories: a few branches that share prefixes, some ending in tombstones.
    static func randomPaths(_ rng: inout SeededRandom) -> [(path: [Revision], deleted: Bool)] {
        var trunk: [Revision] = []
        let trunkLength = Int.random(in: 1...6, using: &rng)
        for pos in 1...trunkLength { trunk.append(Revision(pos: pos, hash: randomHash(&rng))) }
        var paths: [(path: [Revision], deleted: Bool)] = [(trunk.reversed(), Bool.random(using: &rng) && Int.random(in: 0..<4, using: &rng) == 0)]
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            let branchPoint = Int.random(in: 0..<trunkLength, using: &rng)
            var branch = Array(trunk[0...branchPoint])
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                branch.append(Revision(pos: branch.count + 1, hash: randomHash(&rng)))
            }
            paths.append((branch.reversed(), Int.random(in: 0..<3, using: &rng) == 0))
        }
        return paths
    }

    static func build(_ paths: [(path: [Revision], deleted: Bool)]) -> RevisionTree {
        var tree = RevisionTree()
        for (path, deleted) in paths { tree.merge(path: path, deleted: deleted) }
        return tree
    }

    @Test("The winner is the leaf CouchDB and PouchDB pick: live first, then generation, then hash")
    func winnerMatchesReferenceRule() {
        var rng = SeededRandom(seed: 42)
        for _ in 0..<500 {
            let paths = Self.randomPaths(&rng)
            let tree = Self.build(paths)
            let leaves = tree.leaves
            // Reference: brute force over leaves with the documented ordering.
            let expected = leaves.max { a, b in
                if a.deleted != b.deleted { return a.deleted }  // deleted loses
                if a.rev.pos != b.rev.pos { return a.rev.pos < b.rev.pos }
                return a.rev.hash < b.rev.hash
            }
            #expect(tree.winner?.rev == expected?.rev)
            // Every path's newest revision is in the tree, and leaves have no children.
            for (path, _) in paths { #expect(tree.contains(path[0])) }
            for leaf in leaves { #expect(tree.isLeaf(leaf.rev)) }
        }
    }

    @Test("Merging the same histories in any order gives the same tree shape and winner")
    func mergeIsOrderIndependent() {
        var rng = SeededRandom(seed: 7)
        for _ in 0..<300 {
            let paths = Self.randomPaths(&rng)
            let a = Self.build(paths)
            let b = Self.build(paths.shuffled(using: &rng))
            #expect(a.winner?.rev == b.winner?.rev)
            #expect(Set(a.leaves.map(\.rev)) == Set(b.leaves.map(\.rev)))
            #expect(Set(a.nodes.map(\.rev)) == Set(b.nodes.map(\.rev)))
            for leaf in a.leaves { #expect(a.path(to: leaf.rev) == b.path(to: leaf.rev)) }
            // Merging again changes nothing.
            var c = a
            for (path, deleted) in paths {
                let added = c.merge(path: path, deleted: deleted)
                #expect(!added)
            }
            #expect(c == a)
        }
    }

    @Test("Stemming keeps every leaf, its `limit` newest ancestors, and nothing farther from every leaf")
    func stemmingBoundsDepth() throws {
        var rng = SeededRandom(seed: 99)
        for _ in 0..<300 {
            var tree = Self.build(Self.randomPaths(&rng))
            let leavesBefore = Set(tree.leaves.map(\.rev))
            let winnerBefore = tree.winner?.rev
            let limit = Int.random(in: 1...5, using: &rng)
            let before = tree
            tree.stem(limit: limit)
            #expect(Set(tree.leaves.map(\.rev)) == leavesBefore)
            #expect(tree.winner?.rev == winnerBefore)
            // As CouchDB's stem: each leaf's path is cut to `limit` and the cut paths are merged,
            // so a revision survives only if it is among the `limit` newest of some leaf's path.
            let kept = Set(before.leaves.flatMap { before.path(to: $0.rev).prefix(limit) })
            #expect(Set(tree.nodes.map(\.rev)) == kept)
            // The storage forms round-trip: `encoded`, and a `docs` row's `stored` beside the
            // row's winner (empty exactly when the tree is its winner alone).
            #expect(try RevisionTree(encoded: tree.encoded) == tree)
            if let winner = tree.winner {
                #expect(tree.stored.isEmpty == (tree.nodes.count == 1))
                #expect(try RevisionTree(stored: tree.stored, winner: winner.rev.description, deleted: winner.deleted) == tree)
            }
        }
    }

    @Test("A stemmed tree still accepts a replicated continuation of its branch")
    func stemmedTreeExtends() {
        var tree = RevisionTree()
        let revs = (1...10).map { Revision(pos: $0, hash: "h\($0)") }
        tree.merge(path: revs.reversed(), deleted: false)
        tree.stem(limit: 3)
        #expect(tree.nodes.count == 3)
        let next = Revision(pos: 11, hash: "h11")
        let added = tree.merge(path: [next] + revs.reversed(), deleted: false)
        #expect(added)
        #expect(tree.winner?.rev == next)
        #expect(tree.leaves.count == 1)
    }

    @Test("Purging a leaf removes its unshared branch and nothing else")
    func purgeRemovesBranch() {
        var tree = RevisionTree()
        let a1 = Revision(pos: 1, hash: "a"), a2 = Revision(pos: 2, hash: "b"), b2 = Revision(pos: 2, hash: "c")
        let b3 = Revision(pos: 3, hash: "d")
        tree.merge(path: [a2, a1], deleted: false)
        tree.merge(path: [b3, b2, a1], deleted: false)
        #expect(tree.winner?.rev == b3)
        let removed = tree.remove(leaves: [b3])
        #expect(Set(removed) == [b3, b2])
        #expect(tree.winner?.rev == a2)
        #expect(tree.remove(leaves: [a2]).count == 2)
        #expect(tree.isEmpty)
    }

    @Test("Revision ids parse and print as N-hash")
    func revisionParsing() {
        #expect(Revision("3-abc") == Revision(pos: 3, hash: "abc"))
        #expect(Revision("3-abc")?.description == "3-abc")
        for bad in ["", "abc", "-abc", "x-abc", "3-", "3-a b"] { #expect(Revision(bad) == nil) }
    }
}
