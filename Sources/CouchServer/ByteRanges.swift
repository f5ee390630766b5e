/// A `Range: bytes=…` header read as CouchDB reads it for an attachment (mochiweb's parser,
/// then `chttpd_db:parse_ranges`): the whole body (no header, a malformed one, one that starts
/// at 0 without an end, or ten ranges or more), some ranges of it, or none it can satisfy (416).
enum ByteRanges: Equatable {
    case whole
    case ranges([ClosedRange<Int>])
    case unsatisfiable

    /// Most ranges answered; more is the whole body.
    static let most = 9

    static func parse(_ header: String?, length: Int) -> ByteRanges {
        guard let header, header.hasPrefix("bytes="), header.utf8.count <= 4_096 else { return .whole }
        var asked: [(from: Int?, to: Int?)] = []
        for part in header.dropFirst("bytes=".count).split(separator: ",", omittingEmptySubsequences: true) {
            let text = part.trimmedOfBlanks()
            guard let dash = text.firstIndex(of: "-") else { return .whole }
            let from = text[..<dash], to = text[text.index(after: dash)...]
            func number(_ digits: Substring) -> Int?? {
                if digits.isEmpty { return .some(nil) }
                guard digits.utf8.count <= 18, digits.allSatisfy(\.isASCIIDigitCharacter), let value = Int(digits)
                else { return nil }
                return .some(value)
            }
            guard let start = number(from), let end = number(to), start != nil || end != nil else { return .whole }
            asked.append((start, end))
        }
        guard !asked.isEmpty else { return .whole }
        var ranges: [ClosedRange<Int>] = []
        for range in asked {
            var (from, to) = range
            // CouchDB's clauses, in its order.
            if from == 0, to == nil { return .whole }
            if from == nil, let suffix = to { (from, to) = (max(0, length - suffix), length - 1) }
            if to == nil { to = length - 1 }
            guard let start = from, var end = to else { return .whole }
            if end >= length { end = length - 1 }
            if end < start { return .unsatisfiable }
            ranges.append(start...end)
        }
        return ranges.count > most ? .whole : .ranges(ranges)
    }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}

extension StringProtocol {
    /// Without spaces and tabs at either end.
    fileprivate func trimmedOfBlanks() -> Substring {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
