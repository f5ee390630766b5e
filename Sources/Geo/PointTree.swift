import Foundation

/// An immutable k-d tree of points on the unit sphere (3-D vectors), in the flat, implicit
/// layout of KDBush: points are reordered so that every node's median sits in the middle of
/// its range, so the tree needs no node objects. Distances are chords in 3-D, which grow with
/// great-circle distance: the antimeridian and the poles are not special anywhere.
///
/// Per point it keeps one 40-byte record of the unit vector and the original lon/lat (to answer
/// with the exact coordinates indexed), its document id (bytes plus a 4-byte end offset),
/// a 12-byte hash entry to find a document's point again when it changes and, for indexes
/// that keep them, its time (8 bytes). The split values of the inner nodes sit apart, in
/// breadth-first order (about 8 bytes per 32 points): a search reads a split at every node
/// it opens, and a compact array stays in cache where the points (24 MB for a million) do not —
/// reading each node's median point instead cost a cache miss per node, a third of a query.
public final class PointTree: Sendable {
    public let count: Int
    /// Per point in tree order: x, y, z of the unit vector, then lon, lat (a query reads the
    /// lon/lat of the points it returns just after measuring them, so they share cache lines).
    let records: [Double]
    static let stride = 5
    /// Inner node k's split value (node k's children are 2k+1 and 2k+2; the root is 0).
    let splits: [Double]
    let idEnds: [UInt32]
    let idBytes: [UInt8]
    /// Id hashes, sorted, with the point each belongs to.
    let hashes: [UInt64]
    let hashPoints: [UInt32]
    /// Each point's time (ms since 1970, NaN when unknown), in tree order; empty when the
    /// index keeps no times.
    let times: [Double]
    static let leafSize = 32

    /// Builds the tree; `points` may be in any order; `times`, when given, one per point.
    public init(_ points: [(id: String, coordinate: Coordinate)], times pointTimes: [Double]? = nil) {
        let n = points.count
        count = n
        var records = [Double](repeating: 0, count: PointTree.stride * n)
        for (i, p) in points.enumerated() {
            let v = Sphere.unitVector(p.coordinate)
            let r = PointTree.stride * i
            (records[r], records[r + 1], records[r + 2]) = (v.x, v.y, v.z)
            (records[r + 3], records[r + 4]) = (p.coordinate.lon, p.coordinate.lat)
        }
        // Sorted in place; `order` follows, to put ids and times in tree order too.
        var order = [Int32](0..<Int32(n))
        var splits = [Double](repeating: 0, count: PointTree.innerNodes(left: 0, right: n - 1, node: 0))
        records.withUnsafeMutableBufferPointer { records in
            order.withUnsafeMutableBufferPointer { ids in
                splits.withUnsafeMutableBufferPointer { splits in
                    PointTree.sort(
                        ids, records, splits, left: 0, right: n - 1, node: 0,
                        box: Box(min: (-1, -1, -1), max: (1, 1, 1)))
                }
            }
        }
        self.records = records
        self.splits = splits
        var times = pointTimes == nil ? [] : [Double](repeating: .nan, count: n)
        if let pointTimes {
            for (position, original) in order.enumerated() { times[position] = pointTimes[Int(original)] }
        }
        self.times = times
        var idEnds = [UInt32](repeating: 0, count: n)
        var idBytes: [UInt8] = []
        idBytes.reserveCapacity(points.reduce(0) { $0 + $1.id.utf8.count })
        for (position, original) in order.enumerated() {
            idBytes.append(contentsOf: points[Int(original)].id.utf8)
            idEnds[position] = UInt32(idBytes.count)
        }
        self.idEnds = idEnds
        self.idBytes = idBytes
        var hashed = order.enumerated().map { (PointTree.hash(points[Int($0.element)].id), UInt32($0.offset)) }
        hashed.sort { $0.0 < $1.0 }
        hashes = hashed.map(\.0)
        hashPoints = hashed.map(\.1)
    }

    /// FNV-1a, 64 bits.
    static func hash(_ id: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }

    public func id(_ point: Int) -> String {
        let start = point == 0 ? 0 : Int(idEnds[point - 1])
        let end = Int(idEnds[point])
        return idBytes.withUnsafeBufferPointer {
            String(decoding: UnsafeBufferPointer(rebasing: $0[start..<end]), as: UTF8.self)
        }
    }

    public func coordinate(_ point: Int) -> Coordinate {
        Coordinate(lon: records[PointTree.stride * point + 3], lat: records[PointTree.stride * point + 4])
    }

    /// The point's time, if the tree keeps times and it has one.
    public func time(_ point: Int) -> Double? {
        guard !times.isEmpty, !times[point].isNaN else { return nil }
        return times[point]
    }

    /// Whether the point's id starts with `prefix` (compared as bytes, no string made).
    func id(_ point: Int, hasPrefix prefix: [UInt8]) -> Bool {
        let start = point == 0 ? 0 : Int(idEnds[point - 1])
        guard Int(idEnds[point]) - start >= prefix.count else { return false }
        for (i, byte) in prefix.enumerated() where idBytes[start + i] != byte { return false }
        return true
    }

    /// The point that holds document `id`, if any.
    public func point(for id: String) -> Int? {
        let h = PointTree.hash(id)
        var low = 0, high = hashes.count
        while low < high {
            let mid = (low + high) / 2
            if hashes[mid] < h { low = mid + 1 } else { high = mid }
        }
        while low < hashes.count, hashes[low] == h {
            if self.id(Int(hashPoints[low])) == id { return Int(hashPoints[low]) }
            low += 1
        }
        return nil
    }

    /// Approximate bytes held per point (for `_geo_info` and the benchmark).
    public var bytes: Int {
        records.count * 8 + splits.count * 8 + idEnds.count * 4 + idBytes.count + hashes.count * 8 + hashPoints.count
            * 4 + times.count * 8
    }

    // MARK: Building

    /// Whether the node holding points `left...right` is a leaf.
    @inline(__always)
    static func isLeaf(left: Int, right: Int) -> Bool { right - left <= leafSize }

    /// Where an inner node holding `left...right` splits: `left..<m` below, `m...right` above.
    @inline(__always)
    static func middle(left: Int, right: Int) -> Int { (left + right + 1) >> 1 }

    /// The length of the split array for the subtree at `node` (its highest inner node + 1).
    static func innerNodes(left: Int, right: Int, node: Int) -> Int {
        if isLeaf(left: left, right: right) { return 0 }
        let m = middle(left: left, right: right)
        return max(
            node + 1, innerNodes(left: left, right: m - 1, node: 2 * node + 1),
            innerNodes(left: m, right: right, node: 2 * node + 2))
    }

    /// Splits on the widest side of the node's box (the box its ancestors' splits imply, so a
    /// query can work out the same axis without storing it): points below the split value go
    /// to the lower child, the median and those above it to the upper one.
    static func sort(
        _ ids: UnsafeMutableBufferPointer<Int32>, _ coordinates: UnsafeMutableBufferPointer<Double>,
        _ splits: UnsafeMutableBufferPointer<Double>, left: Int, right: Int, node: Int, box: Box
    ) {
        if isLeaf(left: left, right: right) { return }
        let m = middle(left: left, right: right)
        let axis = box.widestAxis
        select(ids, coordinates, k: m, left: left, right: right, axis: axis)
        let split = coordinates[stride * m + axis]
        splits[node] = split
        var lowBox = box, highBox = box
        lowBox.setMax(axis, split)
        highBox.setMin(axis, split)
        sort(ids, coordinates, splits, left: left, right: m - 1, node: 2 * node + 1, box: lowBox)
        sort(ids, coordinates, splits, left: m, right: right, node: 2 * node + 2, box: highBox)
    }

    /// Floyd–Rivest selection: puts the k-th smallest (on `axis`) at k, smaller ones before it.
    static func select(
        _ ids: UnsafeMutableBufferPointer<Int32>, _ c: UnsafeMutableBufferPointer<Double>, k: Int, left: Int,
        right: Int, axis: Int
    ) {
        var left = left, right = right
        while right > left {
            if right - left > 600 {
                let n = Double(right - left + 1)
                let m = Double(k - left + 1)
                let z = log(n)
                let s = 0.5 * exp(2 * z / 3)
                let sd = 0.5 * (z * s * (n - s) / n).squareRoot() * (m - n / 2 < 0 ? -1 : 1)
                let newLeft = max(left, Int((Double(k) - m * s / n + sd).rounded(.down)))
                let newRight = min(right, Int((Double(k) + (n - m) * s / n + sd).rounded(.down)))
                select(ids, c, k: k, left: newLeft, right: newRight, axis: axis)
            }
            let t = c[stride * k + axis]
            var i = left, j = right
            swap(ids, c, left, k)
            if c[stride * right + axis] > t { swap(ids, c, left, right) }
            while i < j {
                swap(ids, c, i, j)
                i += 1
                j -= 1
                while c[stride * i + axis] < t { i += 1 }
                while c[stride * j + axis] > t { j -= 1 }
            }
            if c[stride * left + axis] == t {
                swap(ids, c, left, j)
            } else {
                j += 1
                swap(ids, c, j, right)
            }
            if j <= k { left = j + 1 }
            if k <= j { right = j - 1 }
        }
    }

    @inline(__always)
    static func swap(
        _ ids: UnsafeMutableBufferPointer<Int32>, _ c: UnsafeMutableBufferPointer<Double>, _ i: Int, _ j: Int
    ) {
        ids.swapAt(i, j)
        for offset in 0..<stride { c.swapAt(stride * i + offset, stride * j + offset) }
    }

    // MARK: Nearest first

    /// Visits points in increasing distance from `center` (squared chord), up to `maxChordSquared`,
    /// calling `visit` with each point and its squared chord until it returns false.
    ///
    /// Best-first search with two heaps: nodes (ordered by the distance to their box) and
    /// points (ordered by their own distance); the nearer top is taken next, so points come
    /// out in exact order and the search stops as soon as the caller has enough. (A bounded
    /// k-nearest search that prunes by the k-th distance measured slower on clustered tracks:
    /// it must still open every node that reaches within that distance.)
    public func nearest(
        to center: (x: Double, y: Double, z: Double), maxChordSquared: Double, _ visit: (Int, Double) -> Bool
    ) {
        guard count > 0 else { return }
        // Node boxes live beside the heap, so heap entries stay 24 bytes.
        var nodes = Heap<Node>(capacity: 64)
        // Room for the points of a typical query's opened leaves (about 330), so it rarely grows.
        var points = Heap<PointItem>(capacity: 1024)
        var boxes = SearchBuffer<Box>(capacity: 128)
        defer { nodes.free(); points.free(); boxes.free() }
        _ = boxes.append(Box(min: (-1, -1, -1), max: (1, 1, 1)))
        nodes.push(Node(distance: 0, left: 0, right: Int32(count - 1), box: 0, node: 0))
        records.withUnsafeBufferPointer { records in
            splits.withUnsafeBufferPointer { splits in
                let c = records.baseAddress!
                while true {
                    let nodeTop = nodes.topDistance
                    if points.count > 0, points.topDistance <= nodeTop {
                        let point = points.pop()
                        if !visit(Int(point.index), point.distance) { return }
                        continue
                    }
                    guard nodes.count > 0, nodeTop <= maxChordSquared else { return }
                    let node = nodes.pop()
                    let left = Int(node.left), right = Int(node.right)
                    if PointTree.isLeaf(left: left, right: right) {
                        for i in left...right {
                            let r = PointTree.stride * i
                            let dx = c[r] - center.x, dy = c[r + 1] - center.y, dz = c[r + 2] - center.z
                            let d = dx * dx + dy * dy + dz * dz
                            if d <= maxChordSquared { points.push(PointItem(distance: d, index: Int32(i))) }
                        }
                        continue
                    }
                    let m = PointTree.middle(left: left, right: right)
                    let box = boxes.base[Int(node.box)]
                    let axis = box.widestAxis
                    let split = splits[Int(node.node)]
                    var lowBox = box, highBox = box
                    lowBox.setMax(axis, split)
                    highBox.setMin(axis, split)
                    let lowBound = lowBox.distance(center)
                    if lowBound <= maxChordSquared {
                        let index = Int32(boxes.append(lowBox))
                        nodes.push(
                            Node(
                                distance: lowBound, left: Int32(left), right: Int32(m - 1), box: index,
                                node: 2 * node.node + 1))
                    }
                    let highBound = highBox.distance(center)
                    if highBound <= maxChordSquared {
                        let index = Int32(boxes.append(highBox))
                        nodes.push(
                            Node(
                                distance: highBound, left: Int32(m), right: Int32(right), box: index,
                                node: 2 * node.node + 2))
                    }
                }
            }
        }
    }

    struct Box {
        var min: (Double, Double, Double)
        var max: (Double, Double, Double)

        /// The axis along which the box is widest (the first of equals).
        var widestAxis: Int {
            let wx = max.0 - min.0, wy = max.1 - min.1, wz = max.2 - min.2
            return wx >= wy ? (wx >= wz ? 0 : 2) : (wy >= wz ? 1 : 2)
        }

        mutating func setMax(_ axis: Int, _ value: Double) {
            switch axis {
            case 0: max.0 = value
            case 1: max.1 = value
            default: max.2 = value
            }
        }

        mutating func setMin(_ axis: Int, _ value: Double) {
            switch axis {
            case 0: min.0 = value
            case 1: min.1 = value
            default: min.2 = value
            }
        }

        /// Squared distance from q to the box (0 inside).
        @inline(__always)
        func distance(_ q: (x: Double, y: Double, z: Double)) -> Double {
            let dx = q.x < min.0 ? min.0 - q.x : (q.x > max.0 ? q.x - max.0 : 0)
            let dy = q.y < min.1 ? min.1 - q.y : (q.y > max.1 ? q.y - max.1 : 0)
            let dz = q.z < min.2 ? min.2 - q.z : (q.z > max.2 ? q.z - max.2 : 0)
            return dx * dx + dy * dy + dz * dz
        }
    }

    protocol HeapItem { var distance: Double { get } }

    struct Node: HeapItem {
        var distance: Double
        var left: Int32
        var right: Int32
        /// Index of the node's box in the search's box list.
        var box: Int32
        /// The node's number in breadth-first order (where its split value is).
        var node: Int32
    }

    struct PointItem: HeapItem {
        var distance: Double
        var index: Int32
    }

    /// Storage a search allocates and frees itself (no array uniqueness or bounds checks on the
    /// hot path: measured 15–20% faster queries than arrays), growing by doubling.
    struct SearchBuffer<Element> {
        var base: UnsafeMutablePointer<Element>
        var count = 0
        var capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        func free() { base.deallocate() }

        /// Appends and returns the element's index.
        @inline(__always)
        mutating func append(_ element: Element) -> Int {
            if count == capacity {
                let bigger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
                bigger.moveInitialize(from: base, count: count)
                base.deallocate()
                base = bigger
                capacity *= 2
            }
            (base + count).initialize(to: element)
            count += 1
            return count - 1
        }
    }

    /// A 4-ary min-heap on distance: half the levels of a binary heap, so a pop (the search's
    /// commonest step) makes fewer hard-to-predict moves; the four children are adjacent.
    struct Heap<Item: HeapItem> {
        var storage: SearchBuffer<Item>

        init(capacity: Int) { storage = SearchBuffer(capacity: capacity) }

        func free() { storage.free() }

        var count: Int { storage.count }

        @inline(__always) var topDistance: Double { storage.count > 0 ? storage.base[0].distance : .infinity }

        @inline(__always)
        mutating func push(_ item: Item) {
            var i = storage.append(item)
            let base = storage.base
            let d = item.distance
            while i > 0 {
                let parent = (i - 1) >> 2
                if base[parent].distance <= d { break }
                base[i] = base[parent]
                i = parent
            }
            base[i] = item
        }

        @inline(__always)
        mutating func pop() -> Item {
            let base = storage.base
            let top = base[0]
            storage.count -= 1
            let n = storage.count
            if n == 0 { return top }
            let last = base[n]
            let d = last.distance
            var i = 0
            while true {
                let first = 4 * i + 1
                if first >= n { break }
                var child = first
                var smallest = base[first].distance
                let end = min(first + 4, n)
                var c = first + 1
                while c < end {
                    let cd = base[c].distance
                    if cd < smallest { smallest = cd; child = c }
                    c += 1
                }
                if smallest >= d { break }
                base[i] = base[child]
                i = child
            }
            base[i] = last
            return top
        }
    }
}
