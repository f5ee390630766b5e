import Foundation
import LTTestSupport
import LinearRegex
import Testing

@Suite("Regular expressions in linear time")
struct LinearRegexTests {
    /// A random pattern of the syntax both PCRE and ICU (Foundation's NSRegularExpression) read
    /// the same way on ASCII subjects without newlines.
    static func pattern(_ random: inout SeededRandom, depth: Int = 0) -> String {
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        let roll = random.next() % 100
        if depth > 3 || roll < 30 {
            return pick(["a", "b", "c", ".", "[ab]", "[^a]", "[a-c]", "\\d", "\\w", "\\s", "x", " ", "[b-]", "\\.", "-"])
        }
        switch roll {
        case 30..<45: return "(" + pattern(&random, depth: depth + 1) + ")"
        case 45..<55: return "(?:" + pattern(&random, depth: depth + 1) + "|" + pattern(&random, depth: depth + 1) + ")"
        case 55..<80: return pattern(&random, depth: depth + 1) + pattern(&random, depth: depth + 1)
        case 80..<92:
            let atom = "(?:" + pattern(&random, depth: depth + 1) + ")"
            return atom + pick(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "+?"])
        default:
            return pick(["^", "$", "\\b", "\\B"]) + pattern(&random, depth: depth + 1)
        }
    }

    @Test("Matches exactly where NSRegularExpression (ICU) finds a match, for random patterns and subjects", arguments: [1, 2, 3, 4])
    func differential(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let alphabet = Array("abcx -.1")
        var compared = 0
        for _ in 0..<200 {
            let source = Self.pattern(&random)
            let ours = try LinearRegex(source)
            let icu = try NSRegularExpression(pattern: source)
            for _ in 0..<20 {
                let subject = String((0..<Int(random.next() % 12)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
                let expected = icu.firstMatch(in: subject, range: NSRange(subject.startIndex..., in: subject)) != nil
                #expect(ours.matches(subject) == expected, "\(source) on \(subject.debugDescription)")
                compared += 1
            }
        }
        #expect(compared == 4000)
    }

    /// PCRE's meaning where it is not ICU's, as CouchDB (Erlang `re` without `unicode`) answers.
    @Test("Bytes, not characters; PCRE's anchors, newline and caseless rules")
    func pcreMeaning() throws {
        let cases: [(String, String, Bool)] = [
            ("^.$", "é", false), ("^..$", "é", true), ("é", "café", true), ("(?i)É", "é", false), ("(?i)ABC", "xabcx", true),
            ("abc$", "abc\n", true), ("abc\\z", "abc\n", false), ("abc\\Z", "abc\n", true), ("abc$", "abc\n\n", false),
            ("(?m)^b", "a\nb", true), ("^b", "a\nb", false), ("(?s)a.b", "a\nb", true), ("a.b", "a\nb", false), ("a\\Nb", "a\nb", false),
            ("(?m)^$", "a\n", false), ("(?m)a$", "a\nb", true), ("\\Aa", "ba", false), ("\\Ga", "ba", false),
            ("a{", "a{", true), ("a{,3}", "a{,3}", true), ("x{2}", "xx", true), ("\\x41", "A", true), ("\\x{41}", "A", true),
            ("\\101", "A", true), ("\\0101", "\u{8}1", true), ("\\8", "8", true), ("(a)\\8", "a8", true), ("\\012", "\n", true), ("\\cA", "\u{1}", true), ("[\\b]", "\u{8}", true),
            ("\\Qa.b\\E", "a.b", true), ("\\Qa.b\\E", "axb", false), ("[[:alpha:]]+[[:digit:]]", "ab1", true), ("[[:^alpha:]]", "ab", false),
            ("(?i)[^a]", "A", false), ("(?x) a b # comment", "ab", true), ("(?i:A)b", "aB", false), ("(?i:A)b", "ab", true),
            ("[é]", "é", true), ("^[é]$", "é", false), ("\\w", "é", true), ("^\\w\\W$", "é", true), ("[[:upper:]]", "é", true), ("\\s", "\u{0B}", true), ("a\\Kb", "ab", true),
            ("(?<name>a)(?P<other>b)", "ab", true), ("(?#note)a", "a", true), ("a|", "b", true), ("()", "", true), ("a(?i)b|c", "C", true),
            ("\\Ra", "\r\na", true), ("[a\\-z]", "-", true), ("[\\d-z]", "-", true), ("[]a]", "]", true), ("[^]a]", "]", false),
        ]
        for (pattern, subject, expected) in cases {
            #expect(try LinearRegex(pattern).matches(subject) == expected, "\(pattern) on \(subject.debugDescription)")
        }
        // Erlang's tables are Latin-1's: a byte above 127 is that Latin-1 character (0xC3 is Ã,
        // a letter, so a UTF-8 é starts with a word character); caseless folds À-Þ with à-þ.
        #expect(try LinearRegex("(?i)\\xc0").firstMatch(in: [0xE0]) == .match)
        #expect(try LinearRegex("(?i)\\xd7").firstMatch(in: [0xF7]) == .noMatch)  // × and ÷ are not a pair
        #expect(try LinearRegex("\\w").firstMatch(in: [0xA9]) == .noMatch)  // ©
    }

    @Test("What needs backtracking is refused with its reason; PCRE's syntax errors are errors; too large is too large")
    func refusals() {
        func kind(_ pattern: String) -> RegexError.Kind? {
            do { _ = try LinearRegex(pattern); return nil } catch { return error.kind }
        }
        for pattern in ["(a)\\1", "(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", "a++", "a*+", "(?>a)", "(?(1)a|b)", "(?R)", "(?1)", "\\k<n>", "\\g1",
                        "(?P=n)", "\\p{L}", "(*UTF8)a"] {
            #expect(kind(pattern) == .unsupported, "\(pattern)")
        }
        for pattern in ["(", ")", "(a", "a)", "[a", "*a", "a**", "a{2,1}", "\\", "x{70000}", "[z-a]", "(?Q)", "\\L", "[[:nope:]]", "[a-\\d]", "^*", "$+", "\\b*", "(?i)*", "a{2}{3}", "(?<>a)"] {
            #expect(kind(pattern) == .syntax, "\(pattern)")
        }
        #expect(kind("(a{1000}){1000}") == .tooLarge)
        #expect(kind(String(repeating: "(", count: 300) + String(repeating: ")", count: 300)) == .tooLarge)
        #expect(kind(String(repeating: "a", count: 20_000)) == .tooLarge)
        #expect(kind("(a{100}){100}") == nil)
    }

    /// The work is at most the program's size per byte: catastrophic patterns for a backtracking
    /// engine finish within that bound (the budget), never exceeding it.
    @Test("Catastrophic patterns for backtracking engines decide within a linear number of steps", arguments: [16, 48, 4096])
    func linearWork(length: Int) throws {
        let subject = String(repeating: "x", count: length)
        for pattern in ["^(x+x+)+y$", "^(x|x)*y$", "^(x*)*y$", "(x+)+\\b\\d", "^(?:x?){30}x{30}y$", "(.*a){12}"] {
            let regex = try LinearRegex(pattern)
            let bound = (length + 1) * 2 * regex.size + regex.size
            #expect(regex.firstMatch(in: Array(subject.utf8), budget: bound) == .noMatch, "\(pattern) over \(length) x")
        }
        // A budget too small to decide says so rather than guessing.
        #expect(try LinearRegex("^(x+x+)+y$").firstMatch(in: Array(subject.utf8), budget: 10) == .budgetExceeded)
    }
}
