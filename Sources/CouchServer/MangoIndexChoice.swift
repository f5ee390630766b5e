import CouchEngine
import CouchIndexes
import CouchJSON

/// How `_find` picks its index, as CouchDB's `mango_cursor:create` and
/// `mango_cursor_view:choose_best_index` do, with the analysis `_explain` shows of every index
/// not chosen (`mango_cursor:extract_candidate_indexes`).
///
/// The stages: indexes with a partial filter are out unless `use_index` names them; a query in a
/// partition considers partitioned indexes only, a global one the others; an index is usable
/// when the selector requires each of its columns (`_id`, `_rev` and sort fields aside) and
/// it can give the sort order; `use_index` narrows the usable ones; JSON indexes are favoured
/// over `_all_docs`; among them the one whose leading columns the selector narrows most wins,
/// then the one with fewer columns, then by name.
struct MangoIndexChoice {
    /// Why an index was not chosen, named as CouchDB names it.
    enum Reason: String {
        case isPartial = "is_partial", scopeMismatch = "scope_mismatch", fieldMismatch = "field_mismatch"
        case sortOrderMismatch = "sort_order_mismatch", excludedByUser = "excluded_by_user"
        case unfavoredType = "unfavored_type", lessOverlap = "less_overlap", tooManyFields = "too_many_fields"
        case alphabeticallyComesAfter = "alphabetically_comes_after"
    }

    /// A JSON index, or nil for the special `_all_docs` index.
    struct Candidate {
        var index: MangoIndex?
        var usable: Bool
        var reason: Reason?
        var ranking: Int
    }

    /// The winner: a JSON index, `_all_docs` (nil), or nothing usable at all (`usable` false).
    var index: MangoIndex?
    var foundUsable: Bool
    /// Whether `use_index` named an index that was used.
    var usedNamedIndex: Bool
    var others: [Candidate]

    static let allDocsListing: JSON = [
        "ddoc": .null, "name": "_all_docs", "type": "special", "def": ["fields": [["_id": "asc"]]],
    ]

    init(indexes all: [MangoIndex], selector: Selector, sort: [[String]], useIndex: [String]?, partition: String?) {
        func named(_ index: MangoIndex) -> Bool {
            guard let useIndex, let first = useIndex.first else { return false }
            let ddoc = first.hasPrefix("_design/") ? first : "_design/\(first)"
            return index.designDocument == ddoc && (useIndex.count < 2 || index.name == useIndex[1])
        }
        let partial = all.filter { $0.partialFilter != nil && !named($0) }
        let considered = all.filter { $0.partialFilter == nil || named($0) }
        let inScope = considered.filter { $0.partitioned == (partition != nil) }
        let outOfScope = considered.filter { $0.partitioned != (partition != nil) && $0.partialFilter == nil }

        var notUsable: [(MangoIndex?, Reason)] = []
        var usable: [MangoIndex] = []
        for index in inScope {
            if let reason = Self.unusable(index, selector: selector, sort: sort) {
                notUsable.append((index, reason))
            } else {
                usable.append(index)
            }
        }
        // `_all_docs` serves any query without a sort, or one sorted by `_id`.
        let indexableFields = selector.indexableFieldPaths
        let allDocsUsable = sort.isEmpty || sort == [["_id"]]
        if !allDocsUsable {
            notUsable.append((nil, indexableFields.contains(["_id"]) ? .sortOrderMismatch : .fieldMismatch))
        }

        let namedUsable = usable.filter(named)
        let filtered = namedUsable.isEmpty ? usable : namedUsable
        let excluded = namedUsable.isEmpty ? [] : usable.filter { !named($0) }
        let allDocsFiltered = allDocsUsable && (namedUsable.isEmpty || useIndex == ["_all_docs"])
        let allDocsExcluded = allDocsUsable && !allDocsFiltered

        // JSON indexes first; `_all_docs` only when none is left. Each index's prefix: its
        // leading columns the selector narrows.
        let narrowed = indexableFields.count
        let ranked = Self.ranked(filtered, selector: selector)
        usedNamedIndex = !namedUsable.isEmpty
        var candidates: [Candidate] = []
        let sortedCount: Int
        if let (winner, _) = ranked.first {
            index = winner
            foundUsable = true
            sortedCount = ranked.count
            for (n, (other, prefix)) in ranked.enumerated().dropFirst() {
                let reason: Reason =
                    narrowed - prefix > 0
                    ? .lessOverlap
                    : other.fields.count > winner.fields.count ? .tooManyFields : .alphabeticallyComesAfter
                candidates.append(Candidate(index: other, usable: true, reason: reason, ranking: n))
            }
        } else {
            index = nil
            foundUsable = allDocsFiltered
            sortedCount = allDocsFiltered ? 1 : 0
        }
        let unfavored = ranked.isEmpty ? [] : (allDocsFiltered ? [nil] : []) as [MangoIndex?]
        candidates += Self.staged(
            after: sortedCount, unfavored: unfavored, excluded: excluded + (allDocsExcluded ? [nil] : []),
            notUsable: notUsable,
            outOfScope: outOfScope, partial: partial)
        others = Self.listed(candidates)
    }

    /// The indexes not chosen after the usable ones, ranked as CouchDB numbers its stages
    /// (unfavoured type, excluded by `use_index`, not usable, out of scope, partial): each
    /// non-empty stage pushes the next one down.
    static func staged(
        after sortedCount: Int, unfavored: [MangoIndex?], excluded: [MangoIndex?], notUsable: [(MangoIndex?, Reason)],
        outOfScope: [MangoIndex], partial: [MangoIndex]
    ) -> [Candidate] {
        let unfavoredRank = max(1, sortedCount)
        let excludedRank = unfavoredRank + (unfavored.isEmpty ? 0 : 1)
        let notUsableRank = excludedRank + (excluded.isEmpty ? 0 : 1)
        let outOfScopeRank = notUsableRank + (notUsable.isEmpty ? 0 : 1)
        let partialRank = outOfScopeRank + (outOfScope.isEmpty ? 0 : 1)
        return unfavored.map { Candidate(index: $0, usable: true, reason: .unfavoredType, ranking: unfavoredRank) }
            + excluded.map { Candidate(index: $0, usable: true, reason: .excludedByUser, ranking: excludedRank) }
            + notUsable.map { Candidate(index: $0.0, usable: false, reason: $0.1, ranking: notUsableRank) }
            + outOfScope.map { Candidate(index: $0, usable: false, reason: .scopeMismatch, ranking: outOfScopeRank) }
            + partial.map { Candidate(index: $0, usable: false, reason: .isPartial, ranking: partialRank) }
    }

    /// The usable indexes best first, each with its prefix (its leading columns the selector
    /// narrows): the longest prefix, then the fewest columns, then by design document and name.
    static func ranked(_ indexes: [MangoIndex], selector: Selector) -> [(MangoIndex, prefix: Int)] {
        indexes.map { index in
            (
                index,
                prefix: index.fields.prefix { selector.conditions(on: $0).contains(where: MangoRange.isIndexable) }
                    .count
            )
        }.sorted { a, b in
            if a.prefix != b.prefix { return a.prefix > b.prefix }
            if a.0.fields.count != b.0.fields.count { return a.0.fields.count < b.0.fields.count }
            return (a.0.designDocument, a.0.name) <= (b.0.designDocument, b.0.name)
        }
    }

    /// The candidates in the order `_explain` lists them: CouchDB folds a map keyed by index
    /// records into a list, so by design document and name, descending, `_all_docs` last.
    static func listed(_ candidates: [Candidate]) -> [Candidate] {
        candidates.sorted { a, b in
            guard let x = a.index else { return false }
            guard let y = b.index else { return true }
            if x.designDocument != y.designDocument {
                return Array(y.designDocument.utf8).lexicographicallyPrecedes(Array(x.designDocument.utf8))
            }
            return Array(y.name.utf8).lexicographicallyPrecedes(Array(x.name.utf8))
        }
    }

    /// Why a JSON index cannot answer (nil when it can), as `mango_idx_view:is_usable` decides.
    static func unusable(_ index: MangoIndex, selector: Selector, sort: [[String]]) -> Reason? {
        // `_id` and `_rev` are in every document, and sorting on a field implies it exists.
        let required = index.fields.allSatisfy {
            $0 == ["_id"] || $0 == ["_rev"] || sort.contains($0) || selector.requiresField($0)
        }
        if !required { return .fieldMismatch }
        return canSort(index, selector: selector, sort: sort) ? nil : .sortOrderMismatch
    }

    /// Whether the index's order is the sort's (`mango_idx_view:can_use_sort`): its columns
    /// begin with the sort fields, after leading columns the selector fixes to one value.
    static func canSort(_ index: MangoIndex, selector: Selector, sort: [[String]]) -> Bool {
        guard let firstSort = sort.first else { return true }
        var columns = index.fields[...]
        while let column = columns.first {
            if column == firstSort { return columns.starts(with: sort) }
            let constant = selector.conditions(on: column).contains {
                if case .eq = $0 { return true } else { return false }
            }
            guard constant else { return false }
            columns = columns.dropFirst()
        }
        return false
    }

    /// `index_candidates` of `_explain`.
    func candidatesJSON(fields: [String]?) -> JSON {
        .array(
            others.map { candidate in
                [
                    "index": candidate.index?.listing ?? Self.allDocsListing,
                    "analysis": [
                        "usable": .bool(candidate.usable),
                        "reasons": [["name": .string((candidate.reason ?? .unfavoredType).rawValue)]],
                        "ranking": .int(candidate.ranking),
                        "covering": candidate.index.map { .bool($0.covers(fields: fields, selector: nil)) } ?? .null,
                    ],
                ]
            })
    }

    /// `selector_hints` of `_explain`: which of the selector's fields a JSON index could serve.
    static func selectorHints(_ selector: Selector) -> JSON {
        let indexable = Set(selector.indexableFieldPaths.map { $0.joined(separator: ".") })
        let all = Set(selector.fieldPaths.map { $0.joined(separator: ".") })
        return [
            [
                "type": "json",
                "indexable_fields": .array(indexable.sorted().map(JSON.string)),
                "unindexable_fields": .array(all.subtracting(indexable).sorted().map(JSON.string)),
            ]
        ]
    }
}

extension Selector {
    /// Fields of the top-level conjunction with a condition an index range can use
    /// (`mango_idx_view:indexable_fields`).
    var indexableFieldPaths: [[String]] {
        var seen: Set<[String]> = []
        return fieldPaths.filter { path in
            selector(hasIndexable: path) && seen.insert(path).inserted
        }
    }

    private func selector(hasIndexable path: [String]) -> Bool {
        conditions(on: path).contains(where: MangoRange.isIndexable)
    }
}
