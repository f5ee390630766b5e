/// Why a pattern cannot be used: PCRE would refuse it too (`syntax`), or it needs what a
/// matcher in linear time cannot do — back-references, lookaround, atomic groups, possessive
/// quantifiers, recursion, conditions (`unsupported`) — or it is too large (`tooLarge`).
public struct RegexError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case syntax, unsupported, tooLarge }
    public let kind: Kind
    public let reason: String
    public var description: String { reason }

    static func syntax(_ reason: String) -> RegexError { RegexError(kind: .syntax, reason: reason) }
    static func unsupported(_ what: String) -> RegexError {
        RegexError(kind: .unsupported, reason: "\(what) cannot be matched in linear time and is not supported")
    }
}

/// A zero-width condition on the position between two bytes.
enum Assertion: Hashable, Sendable {
    /// `\A`, `\G`, and `^` outside multiline mode: the start of the subject.
    case start
    /// `^` in multiline mode: the start, or after a newline that does not end the subject.
    case lineStart
    /// `\z`: the very end.
    case end
    /// `\Z`, and `$` outside multiline mode: the end, or before a newline that ends the subject.
    case endOrFinalNewline
    /// `$` in multiline mode: the end, or before any newline.
    case lineEnd
    case wordBoundary, notWordBoundary
}

/// A parsed pattern: what it matches, without captures (a match only answers yes or no).
indirect enum Node: Sendable {
    case empty
    case bytes(ByteSet)
    case sequence([Node])
    case choice([Node])
    /// `max` nil: no upper bound.
    case repetition(Node, min: Int, max: Int?)
    case assertion(Assertion)
}

/// PCRE's pattern syntax over bytes, as CouchDB's Erlang `re` reads a `$regex` (no `unicode`
/// option: each byte of the pattern and of the subject is a character).
struct PatternParser {
    struct Flags {
        var caseless = false, multiline = false, dotAll = false, extended = false
    }

    /// PCRE's largest repetition count.
    static let maxRepeat = 65_535

    private let bytes: [UInt8]
    private var position = 0
    private var flags = Flags()
    private var depth = 0
    /// Capturing groups opened so far (`\N` after N of them is a back-reference).
    private var groups = 0

    init(_ pattern: [UInt8]) {
        bytes = pattern
    }

    static func parse(_ pattern: [UInt8]) throws(RegexError) -> Node {
        var parser = PatternParser(pattern)
        let node = try parser.alternation()
        if parser.position < parser.bytes.count {
            throw .syntax("unmatched closing parenthesis at offset \(parser.position)")
        }
        return node
    }

    private var atEnd: Bool { position >= bytes.count }
    private func peek(_ offset: Int = 0) -> UInt8? { position + offset < bytes.count ? bytes[position + offset] : nil }
    private func isNext(_ text: String) -> Bool { bytes[position...].starts(with: text.utf8) }

    // MARK: Structure

    private mutating func alternation() throws(RegexError) -> Node {
        let saved = flags
        var branches = [try sequence()]
        while peek() == UInt8(ascii: "|") {
            position += 1
            branches.append(try sequence())
        }
        flags = saved  // `(?i)` lasts to the end of its group
        return branches.count == 1 ? branches[0] : .choice(branches)
    }

    private mutating func sequence() throws(RegexError) -> Node {
        var items: [Node] = []
        while true {
            skipExtendedSpace()
            guard let byte = peek(), byte != UInt8(ascii: "|"), byte != UInt8(ascii: ")") else { break }
            guard var atom = try atom() else { continue }
            skipExtendedSpace()
            let quantifierAt = position
            if let (min, max) = try quantifier() {
                // PCRE repeats neither nothing nor a bare assertion (`^*`, `\b+`); a group may hold one.
                switch atom {
                case .empty, .assertion:
                    throw .syntax("quantifier does not follow a repeatable item at offset \(quantifierAt)")
                default: break
                }
                atom = .repetition(atom, min: min, max: max)
                skipExtendedSpace()
                if let next = peek(),
                    next == UInt8(ascii: "*") || next == UInt8(ascii: "+") || next == UInt8(ascii: "?")
                        || (next == UInt8(ascii: "{") && isQuantifierBrace())
                {
                    throw .syntax("quantifier does not follow a repeatable item at offset \(position)")
                }
            }
            items.append(atom)
        }
        return items.isEmpty ? .empty : items.count == 1 ? items[0] : .sequence(items)
    }

    /// In extended mode (`(?x)`), whitespace and `#` comments between items are ignored.
    private mutating func skipExtendedSpace() {
        guard flags.extended else { return }
        while let byte = peek() {
            if [9, 10, 11, 12, 13, 32].contains(byte) {
                position += 1
            } else if byte == UInt8(ascii: "#") {
                while let c = peek(), c != 10 { _ = c; position += 1 }
            } else {
                return
            }
        }
    }

    /// `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (then `?` for lazy, which changes nothing here;
    /// `+` for possessive, which does and is refused). A `{` that starts none of these is a literal.
    private mutating func quantifier() throws(RegexError) -> (Int, Int?)? {
        guard let byte = peek() else { return nil }
        var bounds: (Int, Int?)
        switch byte {
        case UInt8(ascii: "*"): bounds = (0, nil); position += 1
        case UInt8(ascii: "+"): bounds = (1, nil); position += 1
        case UInt8(ascii: "?"): bounds = (0, 1); position += 1
        case UInt8(ascii: "{"):
            guard isQuantifierBrace() else { return nil }
            position += 1
            let min = try number()
            var max: Int? = min
            if peek() == UInt8(ascii: ",") {
                position += 1
                max = peek() == UInt8(ascii: "}") ? nil : try number()
            }
            position += 1  // "}"
            if let max, max < min { throw .syntax("numbers out of order in {} quantifier") }
            bounds = (min, max)
        default: return nil
        }
        if peek() == UInt8(ascii: "+") { throw .unsupported("A possessive quantifier") }
        if peek() == UInt8(ascii: "?") { position += 1 }
        return bounds
    }

    /// Whether the `{` here starts `{n}`, `{n,}` or `{n,m}`.
    private func isQuantifierBrace() -> Bool {
        var i = position + 1
        func digits() -> Bool {
            let start = i
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
            return i > start
        }
        guard digits() else { return false }
        if i < bytes.count, bytes[i] == UInt8(ascii: ",") {
            i += 1
            _ = digits()
        }
        return i < bytes.count && bytes[i] == UInt8(ascii: "}")
    }

    private mutating func number() throws(RegexError) -> Int {
        var value = 0
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            if value > PatternParser.maxRepeat { throw .syntax("number too big in {} quantifier") }
            position += 1
        }
        return value
    }

    /// One item; nil for what matches nothing and takes no quantifier (`(?i)`, `(?#...)`, `\E`, `\Q\E`).
    private mutating func atom() throws(RegexError) -> Node? {
        let byte = bytes[position]
        if byte == UInt8(ascii: "{"), isQuantifierBrace() {
            throw .syntax("quantifier does not follow a repeatable item at offset \(position)")
        }
        position += 1
        switch byte {
        case UInt8(ascii: "("): return try group()
        case UInt8(ascii: "["): return .bytes(try characterClass())
        case UInt8(ascii: "."): return .bytes(flags.dotAll ? .all : ByteSet(10).inverted)
        case UInt8(ascii: "^"): return .assertion(flags.multiline ? .lineStart : .start)
        case UInt8(ascii: "$"): return .assertion(flags.multiline ? .lineEnd : .endOrFinalNewline)
        case UInt8(ascii: "\\"): return try escape()
        case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "?"):
            throw .syntax("quantifier does not follow a repeatable item at offset \(position - 1)")
        default: return literal(byte)
        }
    }

    private func literal(_ byte: UInt8) -> Node {
        .bytes(flags.caseless ? ByteSet(byte).caseless : ByteSet(byte))
    }

    // MARK: Groups

    private mutating func group() throws(RegexError) -> Node? {
        if peek() == UInt8(ascii: "*") { throw .unsupported("A verb such as (*UTF8)") }
        if peek() == UInt8(ascii: "?") {
            position += 1
            guard let kind = peek() else { throw .syntax("missing ) at end of pattern") }
            switch kind {
            case UInt8(ascii: ":"), UInt8(ascii: "|"):
                position += 1
            case UInt8(ascii: "#"):
                while let c = peek(), c != UInt8(ascii: ")") { _ = c; position += 1 }
                guard !atEnd else { throw .syntax("missing ) after comment") }
                position += 1
                return nil
            case UInt8(ascii: "="), UInt8(ascii: "!"): throw .unsupported("A lookahead assertion")
            case UInt8(ascii: ">"): throw .unsupported("An atomic group")
            case UInt8(ascii: "("): throw .unsupported("A conditional group")
            case UInt8(ascii: "R"), UInt8(ascii: "&"), UInt8(ascii: "+"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                throw .unsupported("A recursive or subroutine call")
            case UInt8(ascii: "<") where peek(1) == UInt8(ascii: "=") || peek(1) == UInt8(ascii: "!"):
                throw .unsupported("A lookbehind assertion")
            case UInt8(ascii: "<"), UInt8(ascii: "'"):
                try groupName(
                    closing: kind == UInt8(ascii: "<") ? UInt8(ascii: ">") : UInt8(ascii: "'"), from: position + 1)
                groups += 1
            case UInt8(ascii: "P"):
                switch peek(1) {
                case UInt8(ascii: "<"):
                    try groupName(closing: UInt8(ascii: ">"), from: position + 2)
                    groups += 1
                case UInt8(ascii: "="): throw .unsupported("A back-reference")
                case UInt8(ascii: ">"): throw .unsupported("A recursive or subroutine call")
                default: throw .syntax("unrecognized character after (?P")
                }
            default:
                // Option settings: (?imsx-imsx) for the rest of the group, or (?imsx-imsx:...).
                var flags = self.flags
                var on = true
                while let c = peek(), c != UInt8(ascii: ")"), c != UInt8(ascii: ":") {
                    switch c {
                    case UInt8(ascii: "-"): on = false
                    case UInt8(ascii: "i"): flags.caseless = on
                    case UInt8(ascii: "m"): flags.multiline = on
                    case UInt8(ascii: "s"): flags.dotAll = on
                    case UInt8(ascii: "x"): flags.extended = on
                    case UInt8(ascii: "J"), UInt8(ascii: "U"), UInt8(ascii: "X"): break
                    default: throw .syntax("unrecognized character after (? or (?-")
                    }
                    position += 1
                }
                guard let end = peek() else { throw .syntax("missing ) at end of pattern") }
                position += 1
                if end == UInt8(ascii: ")") {
                    self.flags = flags
                    return nil
                }
                let saved = self.flags
                self.flags = flags
                defer { self.flags = saved }
                return try groupBody()
            }
        }
        groups += 1
        return try groupBody()
    }

    /// `(?<name>`, `(?'name'`, `(?P<name>`: a capturing group like any other here.
    private mutating func groupName(closing: UInt8, from start: Int) throws(RegexError) {
        position = start
        while let c = peek(), c != closing {
            guard c == UInt8(ascii: "_") || ByteSet.word.contains(c) else {
                throw .syntax("syntax error in subpattern name (missing terminator)")
            }
            position += 1
        }
        guard !atEnd, position > start else { throw .syntax("syntax error in subpattern name (missing terminator)") }
        position += 1
    }

    private mutating func groupBody() throws(RegexError) -> Node {
        depth += 1
        guard depth <= 250 else { throw RegexError(kind: .tooLarge, reason: "parentheses are too deeply nested") }
        defer { depth -= 1 }
        let saved = flags
        let inner = try alternation()
        flags = saved
        guard peek() == UInt8(ascii: ")") else { throw .syntax("missing )") }
        position += 1
        // A group is repeatable even when empty: `()` is `(?:)`.
        if case .empty = inner { return .sequence([]) }
        return inner
    }

    // MARK: Escapes

    private mutating func escape() throws(RegexError) -> Node? {
        guard let byte = peek() else { throw .syntax("\\ at end of pattern") }
        position += 1
        switch byte {
        case UInt8(ascii: "A"), UInt8(ascii: "G"): return .assertion(.start)
        case UInt8(ascii: "z"): return .assertion(.end)
        case UInt8(ascii: "Z"): return .assertion(.endOrFinalNewline)
        case UInt8(ascii: "b"): return .assertion(.wordBoundary)
        case UInt8(ascii: "B"): return .assertion(.notWordBoundary)
        case UInt8(ascii: "K"), UInt8(ascii: "E"): return nil
        case UInt8(ascii: "C"): return .bytes(.all)
        case UInt8(ascii: "N"):
            if peek() == UInt8(ascii: "{") { throw .syntax("\\N{name} is not supported") }
            return .bytes(ByteSet(10).inverted)
        case UInt8(ascii: "R"):
            // (?>\r\n|\n|\x0b|\f|\r|\x85), as alternatives.
            var single = ByteSet()
            for b: UInt8 in [10, 11, 12, 13, 0x85] { single.insert(b) }
            return .choice([.sequence([.bytes(ByteSet(13)), .bytes(ByteSet(10))]), .bytes(single)])
        case UInt8(ascii: "Q"):
            var items: [Node] = []
            while !atEnd, !isNext("\\E") {
                items.append(literal(bytes[position]))
                position += 1
            }
            if isNext("\\E") { position += 2 }
            return items.isEmpty ? nil : items.count == 1 ? items[0] : .sequence(items)
        case UInt8(ascii: "1")...UInt8(ascii: "9"):
            // PCRE: a back-reference when below 8 or naming a group opened before; otherwise
            // \8 and \9 are those digits, and other digits up to three octal ones.
            var end = position
            var number = Int(byte - UInt8(ascii: "0"))
            while end < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]), number < 1_000_000 {
                number = number * 10 + Int(bytes[end] - UInt8(ascii: "0"))
                end += 1
            }
            if number < 8 || number <= groups { throw .unsupported("A back-reference") }
            if byte >= UInt8(ascii: "8") { return literal(byte) }
            position -= 1
            var value = 0
            for _ in 0..<3 {
                guard let d = peek(), (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(d) else { break }
                value = value * 8 + Int(d - UInt8(ascii: "0"))
                position += 1
            }
            return literal(UInt8(truncatingIfNeeded: value))
        case UInt8(ascii: "g"), UInt8(ascii: "k"):
            throw .unsupported("A back-reference")
        case UInt8(ascii: "p"), UInt8(ascii: "P"), UInt8(ascii: "X"):
            throw .unsupported("A Unicode property (\\p, \\P, \\X)")
        case UInt8(ascii: "L"), UInt8(ascii: "l"), UInt8(ascii: "U"), UInt8(ascii: "u"):
            throw .syntax("PCRE does not support \\L, \\l, \\N{name}, \\U, or \\u")
        default:
            if let set = try shorthand(byte) { return .bytes(set) }
            position -= 1
            return literal(try escapedByte())
        }
    }

    /// `\d \D \w \W \s \S \h \H \v \V`.
    private func shorthand(_ byte: UInt8) throws(RegexError) -> ByteSet? {
        switch byte {
        case UInt8(ascii: "d"): return .digits
        case UInt8(ascii: "D"): return ByteSet.digits.inverted
        case UInt8(ascii: "w"): return .word
        case UInt8(ascii: "W"): return ByteSet.word.inverted
        case UInt8(ascii: "s"): return .space
        case UInt8(ascii: "S"): return ByteSet.space.inverted
        case UInt8(ascii: "h"): return .horizontalSpace
        case UInt8(ascii: "H"): return ByteSet.horizontalSpace.inverted
        case UInt8(ascii: "v"): return .verticalSpace
        case UInt8(ascii: "V"): return ByteSet.verticalSpace.inverted
        default: return nil
        }
    }

    /// The byte an escape that stands for one byte gives (`position` on the byte after `\`):
    /// control characters, octal and hexadecimal codes, `\cX`, or the character itself.
    private mutating func escapedByte(inClass: Bool = false) throws(RegexError) -> UInt8 {
        let byte = bytes[position]
        position += 1
        func value(_ v: Int) throws(RegexError) -> UInt8 {
            guard v <= 255 else { throw .syntax("character value in \\x{} or \\o{} is too large") }
            return UInt8(v)
        }
        switch byte {
        case UInt8(ascii: "a"): return 7
        case UInt8(ascii: "e"): return 27
        case UInt8(ascii: "f"): return 12
        case UInt8(ascii: "n"): return 10
        case UInt8(ascii: "r"): return 13
        case UInt8(ascii: "t"): return 9
        case UInt8(ascii: "b") where inClass: return 8
        case UInt8(ascii: "0")...UInt8(ascii: "7"):
            // \0 and up to two more octal digits; in a class \1-\7 are octal too.
            var v = Int(byte - UInt8(ascii: "0"))
            for _ in 0..<2 {
                guard let d = peek(), (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(d) else { break }
                v = v * 8 + Int(d - UInt8(ascii: "0"))
                position += 1
            }
            return UInt8(truncatingIfNeeded: v)
        case UInt8(ascii: "o"):
            guard peek() == UInt8(ascii: "{") else { throw .syntax("missing opening brace after \\o") }
            position += 1
            var v = 0
            while let d = peek(), (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(d) {
                v = min(v * 8 + Int(d - UInt8(ascii: "0")), 1 << 20)
                position += 1
            }
            guard peek() == UInt8(ascii: "}") else {
                throw .syntax("non-octal character in \\o{} (closing brace missing?)")
            }
            position += 1
            return try value(v)
        case UInt8(ascii: "x"):
            if peek() == UInt8(ascii: "{") {
                var i = position + 1, v = 0
                while i < bytes.count, let d = PatternParser.hex(bytes[i]) { v = min(v * 16 + d, 1 << 24); i += 1 }
                if i < bytes.count, bytes[i] == UInt8(ascii: "}"), i > position + 1 {
                    position = i + 1
                    return try value(v)
                }
                return 0  // "\x" then a literal "{": PCRE reads \x as NUL
            }
            var v = 0
            for _ in 0..<2 {
                guard let d = peek().flatMap(PatternParser.hex) else { break }
                v = v * 16 + d
                position += 1
            }
            return UInt8(v)
        case UInt8(ascii: "c"):
            guard let c = peek(), c < 128 else { throw .syntax("\\c at end of pattern") }
            position += 1
            let upper = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) ? c - 32 : c
            return upper ^ 0x40
        default:
            return byte
        }
    }

    private static func hex(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A")) + 10
        default: return nil
        }
    }

    // MARK: Character classes

    /// `[...]` after its `[`: bytes, ranges, escapes and POSIX classes, `^` to negate; a `]`
    /// first is a literal. Caseless matching folds before negating, as PCRE does.
    private mutating func characterClass() throws(RegexError) -> ByteSet {
        var negated = false
        if peek() == UInt8(ascii: "^") {
            negated = true
            position += 1
        }
        var set = ByteSet()
        var first = true
        while true {
            guard let byte = peek() else { throw .syntax("missing terminating ] for character class") }
            if byte == UInt8(ascii: "]"), !first {
                position += 1
                break
            }
            first = false
            if byte == UInt8(ascii: "["),
                peek(1) == UInt8(ascii: ":") || peek(1) == UInt8(ascii: ".") || peek(1) == UInt8(ascii: "="),
                let posix = try posixClass()
            {
                set.formUnion(posix)
                continue
            }
            guard let low = try classAtom(into: &set) else { continue }
            // A range, unless the `-` ends the class or what follows is not a single byte.
            if peek() == UInt8(ascii: "-"), let after = peek(1), after != UInt8(ascii: "]") {
                position += 1
                var other = ByteSet()
                if let high = try classAtom(into: &other) {
                    guard high >= low else { throw .syntax("range out of order in character class") }
                    set.insert(low...high)
                    continue
                }
                // `a-\d`: PCRE refuses a range ending in a class.
                throw .syntax("invalid range in character class")
            }
            set.insert(low)
        }
        if flags.caseless { set = set.caseless }
        return negated ? set.inverted : set
    }

    /// One item of a class: the byte it stands for, or nil when it was a set (`\d`) added to `set`.
    private mutating func classAtom(into set: inout ByteSet) throws(RegexError) -> UInt8? {
        let byte = bytes[position]
        position += 1
        guard byte == UInt8(ascii: "\\") else { return byte }
        guard let next = peek() else { throw .syntax("\\ at end of pattern") }
        if let shorthand = try shorthand(next) {
            position += 1
            set.formUnion(shorthand)
            return nil
        }
        switch next {
        case UInt8(ascii: "B"), UInt8(ascii: "R"), UInt8(ascii: "X"), UInt8(ascii: "N"):
            throw .syntax("escape sequence is invalid in character class")
        case UInt8(ascii: "p"), UInt8(ascii: "P"): throw .unsupported("A Unicode property (\\p, \\P)")
        case UInt8(ascii: "L"), UInt8(ascii: "l"), UInt8(ascii: "U"), UInt8(ascii: "u"):
            throw .syntax("PCRE does not support \\L, \\l, \\N{name}, \\U, or \\u")
        case UInt8(ascii: "E"), UInt8(ascii: "Q"):
            position += 1
            // \Q...\E inside a class: each byte literal.
            if next == UInt8(ascii: "Q") {
                while !atEnd, !isNext("\\E") {
                    set.insert(bytes[position])
                    position += 1
                }
                if isNext("\\E") { position += 2 }
            }
            return nil
        default:
            return try escapedByte(inClass: true)
        }
    }

    /// `[:alpha:]` or `[:^alpha:]` at the position; nil when it is not one (then the `[` is a literal).
    private mutating func posixClass() throws(RegexError) -> ByteSet? {
        let kind = bytes[position + 1]
        var i = position + 2
        while i + 1 < bytes.count, !(bytes[i] == kind && bytes[i + 1] == UInt8(ascii: "]")) {
            if bytes[i] == UInt8(ascii: "]") || bytes[i] == UInt8(ascii: "\\") { return nil }
            i += 1
        }
        guard i + 1 < bytes.count else { return nil }
        guard kind == UInt8(ascii: ":") else { throw .syntax("POSIX collating elements are not supported") }
        var name = String(decoding: bytes[(position + 2)..<i], as: UTF8.self)
        let negated = name.hasPrefix("^")
        if negated { name.removeFirst() }
        guard var set = ByteSet.posix(name) else { throw .syntax("unknown POSIX class name") }
        if negated { set = set.inverted }
        position = i + 2
        return set
    }
}
