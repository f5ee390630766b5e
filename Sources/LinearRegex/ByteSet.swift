/// A set of bytes (256 bits): what one step of a pattern may consume.
struct ByteSet: Hashable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    static let all: ByteSet = {
        var set = ByteSet()
        set.insert(0...255)
        return set
    }()

    init() {}

    init(_ byte: UInt8) {
        insert(byte)
    }

    func contains(_ byte: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    mutating func insert(_ byte: UInt8) {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    mutating func insert(_ range: ClosedRange<UInt8>) {
        for byte in range { insert(byte) }
    }

    mutating func formUnion(_ other: ByteSet) {
        words = (words.0 | other.words.0, words.1 | other.words.1, words.2 | other.words.2, words.3 | other.words.3)
    }

    var inverted: ByteSet {
        var set = ByteSet()
        set.words = (~words.0, ~words.1, ~words.2, ~words.3)
        return set
    }

    /// With both cases of every letter in it: PCRE's caseless matching without Unicode, by
    /// Erlang's ISO-Latin-1 tables (A-Z and a-z, À-Þ and à-þ but × and ÷).
    var caseless: ByteSet {
        var set = self
        for upper in ByteSet.upperLetters where contains(upper) || contains(upper + 32) {
            set.insert(upper)
            set.insert(upper + 32)
        }
        return set
    }

    /// Letters with a lower-case partner 32 above them: A-Z and Latin-1's À-Ö, Ø-Þ.
    static let upperLetters: [UInt8] = Array(65...90) + Array(192...214) + Array(216...222)
    /// Latin-1's letters above ASCII: ª µ º À-Ö Ø-ö ø-ÿ.
    static let latin1Letters: ByteSet = {
        var set = ByteSet()
        for byte: UInt8 in [170, 181, 186] { set.insert(byte) }
        set.insert(192...214)
        set.insert(216...246)
        set.insert(248...255)
        return set
    }()

    static func == (a: ByteSet, b: ByteSet) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    // The character tables of Erlang's `re` (ISO-Latin-1), which CouchDB's `$regex` uses
    // without the `unicode` option: a byte above 127 is the Latin-1 character of that code,
    // so the lead byte of a UTF-8 `é` (0xC3, Ã) is a letter and a word character. Measured
    // with Erlang/OTP 25's `re` for every byte (see docs/compatibility.md).
    static let digits: ByteSet = {
        var set = ByteSet()
        set.insert(UInt8(ascii: "0")...UInt8(ascii: "9"))
        return set
    }()

    static let word: ByteSet = {
        var set = digits
        set.insert(UInt8(ascii: "a")...UInt8(ascii: "z"))
        set.insert(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        set.insert(UInt8(ascii: "_"))
        set.formUnion(latin1Letters)
        return set
    }()

    /// `\s`: space, \t, \n, \v (since PCRE 8.34), \f, \r.
    static let space: ByteSet = {
        var set = ByteSet()
        for byte: UInt8 in [9, 10, 11, 12, 13, 32] { set.insert(byte) }
        return set
    }()

    /// `\h`: horizontal space (tab, space, and Latin-1's no-break space).
    static let horizontalSpace: ByteSet = {
        var set = ByteSet()
        for byte: UInt8 in [9, 32, 0xA0] { set.insert(byte) }
        return set
    }()

    /// `\v`: vertical space (\n, \v, \f, \r, and Latin-1's next line).
    static let verticalSpace: ByteSet = {
        var set = ByteSet()
        for byte: UInt8 in [10, 11, 12, 13, 0x85] { set.insert(byte) }
        return set
    }()

    /// The POSIX classes PCRE knows inside brackets (`[:alpha:]`), by the same Latin-1 tables.
    static func posix(_ name: String) -> ByteSet? {
        var set = ByteSet()
        func add(_ range: ClosedRange<Character>) {
            set.insert(range.lowerBound.asciiValue!...range.upperBound.asciiValue!)
        }
        switch name {
        case "alpha": add("a"..."z"); add("A"..."Z"); set.formUnion(latin1Letters)
        case "digit": add("0"..."9")
        case "alnum": add("a"..."z"); add("A"..."Z"); add("0"..."9"); set.formUnion(latin1Letters)
        case "lower":
            add("a"..."z")
            for byte: UInt8 in [170, 181, 186] { set.insert(byte) }
            set.insert(223...246)
            set.insert(248...255)
        case "upper": add("A"..."Z"); set.insert(192...214); set.insert(216...222)
        case "space": set = space
        case "blank": set.insert(9); set.insert(32)
        case "cntrl": set.insert(0...31); set.insert(127...159)
        case "print": set.insert(32...126); set.insert(160...255)
        case "graph": set.insert(33...126); set.insert(160...255)
        case "punct":
            for byte in UInt8(33)...126 where !word.contains(byte) || byte == UInt8(ascii: "_") { set.insert(byte) }
            for byte in UInt8(160)...191 where !latin1Letters.contains(byte) { set.insert(byte) }
            set.insert(215)
            set.insert(247)
        case "xdigit": add("0"..."9"); add("a"..."f"); add("A"..."F")
        case "word": set = word
        case "ascii": set.insert(0...127)
        default: return nil
        }
        return set
    }
}
