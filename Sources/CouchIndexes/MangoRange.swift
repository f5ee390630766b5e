public import CouchEngine
import CouchCollation
public import CouchJSON

/// The keys a selector confines an index scan to, computed as CouchDB's Mango does
/// (`mango_idx_view:range/field_ranges`, `start_key`/`end_key`), for `_explain`'s `mrargs`:
/// for each index column, in order, the range its top-level conditions allow; the start key
/// holds the columns' lower bounds up to the first open one, the end key their upper bounds,
/// ending in CouchDB's `"<MAX>"` sentinel where a column is open above.
public enum MangoRange {
    enum Bound {
        case min, max, value(JSON)

        var json: JSON? {
            if case let .value(value) = self { return value }
            return nil
        }
    }

    enum Operator { case gt, gte, lt, lte, eq }

    struct Range {
        var lowOp: Operator, low: Bound, highOp: Operator, high: Bound
        static let open = Range(lowOp: .gt, low: .min, highOp: .lt, high: .max)
    }

    static func compare(_ a: Bound, _ b: Bound) -> Int {
        switch (a, b) {
        case (.min, .min), (.max, .max): return 0
        case (.min, _), (_, .max): return -1
        case (_, .min), (.max, _): return 1
        case let (.value(x), .value(y)): return JSON.collate(x, y)
        }
    }

    enum Position { case min, low, mid, high, max }

    /// Where `arg` falls against the current bounds (mango_idx_view:range_pos).
    static func position(_ low: Bound, _ arg: Bound, _ high: Bound) -> Position {
        let toLow = compare(arg, low)
        if toLow < 0 { return .min }
        if toLow == 0 { return .low }
        let toHigh = compare(arg, high)
        return toHigh < 0 ? .mid : toHigh == 0 ? .high : .max
    }

    /// Narrows `range` by one condition; nil when nothing can match.
    static func narrow(_ range: Range, _ condition: Selector.Condition) -> Range? {
        var r = range
        switch condition {
        case let .lt(value):
            switch position(r.low, .value(value), r.high) {
            case .min, .low: return nil
            case .mid, .high: r.highOp = .lt; r.high = .value(value)
            case .max: break
            }
        case let .lte(value):
            switch position(r.low, .value(value), r.high) {
            case .min: return nil
            case .low where r.lowOp == .gte || r.lowOp == .eq:
                return Range(lowOp: .eq, low: .value(value), highOp: .eq, high: .value(value))
            case .low: return nil
            case .mid: r.highOp = .lte; r.high = .value(value)
            case .high, .max: break
            }
        case let .eq(value):
            switch position(r.low, .value(value), r.high) {
            case .min, .max: return nil
            case .low where r.lowOp == .gte || r.lowOp == .eq: break
            case .low: return nil
            case .mid: break
            case .high where r.highOp == .lte || r.highOp == .eq: break
            case .high: return nil
            }
            return Range(lowOp: .eq, low: .value(value), highOp: .eq, high: .value(value))
        case let .gte(value):
            switch position(r.low, .value(value), r.high) {
            case .min, .low: break
            case .mid: r.lowOp = .gte; r.low = .value(value)
            case .high where r.highOp == .lte || r.highOp == .eq:
                return Range(lowOp: .eq, low: .value(value), highOp: .eq, high: .value(value))
            case .high, .max: return nil
            }
        case let .gt(value):
            switch position(r.low, .value(value), r.high) {
            case .min: break
            case .low, .mid: r.lowOp = .gt; r.low = .value(value)
            case .high, .max: return nil
            }
        case let .beginsWith(prefix):
            // U+FFFF sorts last among code points in CouchDB's collation.
            guard let lower = narrow(r, .gte(.string(prefix))) else { return nil }
            return narrow(lower, .lte(.string(prefix + "\u{FFFF}")))
        default:
            break  // not indexable: applied to the documents afterwards
        }
        return r
    }

    /// The range a field's top-level (`$and`-joined) conditions allow; nil when they allow
    /// nothing, `.open` when they say nothing about it.
    static func range(_ conditions: [Selector.Condition]) -> Range? {
        var range = Range.open
        for condition in conditions {
            guard let narrowed = narrow(range, condition) else { return nil }
            range = narrowed
        }
        return range
    }

    /// Whether an index scan can use the condition (mango_idx_view:indexable).
    public static func isIndexable(_ condition: Selector.Condition) -> Bool {
        switch condition {
        case .eq, .gt, .gte, .lt, .lte, .beginsWith, .exists: return true
        default: return false
        }
    }

    /// `start_key` and `end_key` of a JSON index on `columns` (null, null when nothing can match).
    public static func keys(columns: [[String]], selector: Selector) -> (start: JSON, end: JSON) {
        var ranges: [Range] = []
        for column in columns {
            let conditions = selector.conditions(on: column)
            guard conditions.contains(where: isIndexable) else { break }
            guard let range = range(conditions) else { return (.null, .null) }
            ranges.append(range)
        }
        var start: [JSON] = []
        for range in ranges {
            guard let low = range.low.json else { break }
            start.append(low)
        }
        var end: [JSON] = []
        for range in ranges {
            guard let high = range.high.json else { break }
            end.append(high)
        }
        end.append("<MAX>")
        return (.array(start), .array(end))
    }

    /// `start_key` and `end_key` of the `_all_docs` index: the `_id` bounds (`""` and `"<MAX>"` where
    /// open), or null and `"<MAX>"` when the selector says nothing of `_id`.
    public static func idKeys(selector: Selector) -> (start: JSON, end: JSON) {
        let conditions = selector.conditions(on: ["_id"])
        guard conditions.contains(where: isIndexable) else { return (.null, "<MAX>") }
        guard let range = range(conditions) else { return (.null, .null) }
        return (range.low.json ?? "", range.high.json ?? "<MAX>")
    }
}
