import CouchJSON
import LinearRegex

/// The rules a new password must meet, CouchDB's `[couch_httpd_auth] password_regexp`
/// (`[chttpd_auth]` first, as CouchDB reads it): an Erlang list whose members are a regular
/// expression, or a tuple of one and the reason to give when a password does not match it.
///
///     [{".{10,}"}, {"[A-Z]+", "Requirement 2."}, "\\d+"]
///
/// A password must match every expression (anywhere in it, as Erlang's `re:run`); the first it
/// does not match answers 400 `bad_request` "Password does not conform to requirements." and
/// that rule's reason. A value that is not such a list refuses every password with 403
/// `forbidden` "Server cannot hash passwords at this time.", as CouchDB does, rather than
/// letting passwords through unchecked.
struct PasswordRequirements: Sendable {
    struct Rule: Sendable {
        let regex: LinearRegex
        let message: String
    }

    static let requirementError = "Password does not conform to requirements."
    static let serverError = CouchError.forbidden("Server cannot hash passwords at this time.")

    let rules: [Rule]

    /// The rules of a configuration value; nil or `[]` asks nothing.
    init(_ value: String?) throws(CouchError) {
        guard let value, !value.isEmpty, value != "[]" else {
            rules = []
            return
        }
        var parser = ConfigTermParser(value)
        guard case let .list(members)? = try? parser.parseWhole() else { throw Self.serverError }
        rules = try members.map { (member) throws(CouchError) in
            let pattern: String
            var message = Self.requirementError
            switch member {
            case let .string(text):
                pattern = text
            case let .tuple(items) where items.count == 1 || items.count == 2:
                guard case let .string(text) = items[0] else { throw Self.serverError }
                pattern = text
                if items.count == 2, case let .string(reason) = items[1], !reason.isEmpty { message += " " + reason }
            default:
                throw Self.serverError
            }
            guard let regex = try? LinearRegex(pattern) else { throw Self.serverError }
            return Rule(regex: regex, message: message)
        }
    }

    /// Throws 400 with the first unmet rule's message.
    func check(_ password: String) throws(CouchError) {
        // Linear-time matching with a step budget that always suffices (64 states at each byte).
        let budget = max(10_000_000, password.utf8.count.multipliedReportingOverflow(by: 64).partialValue)
        for rule in rules where !rule.regex.matches(password, budget: budget) {
            throw CouchError.badRequest(rule.message)
        }
    }
}

/// The Erlang terms a configuration value may hold (`couch_util:parse_term`): lists, tuples,
/// strings (with Erlang's escapes), atoms and integers.
enum ConfigTerm: Equatable, Sendable {
    case list([ConfigTerm])
    case tuple([ConfigTerm])
    case string(String)
    case atom(String)
    case integer(Int)
}

/// Reads one Erlang term; nesting is bounded, as every client-supplied value.
struct ConfigTermParser {
    struct Failure: Error {}

    static let maxDepth = 32
    private let bytes: [UInt8]
    private var index = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    /// The term that is the whole text (blanks around it allowed).
    mutating func parseWhole() throws(Failure) -> ConfigTerm {
        let term = try parse(depth: 0)
        skipBlanks()
        guard index == bytes.count else { throw Failure() }
        return term
    }

    private mutating func skipBlanks() {
        while index < bytes.count,
            bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D
        { index += 1 }
    }

    private mutating func parse(depth: Int) throws(Failure) -> ConfigTerm {
        guard depth < Self.maxDepth else { throw Failure() }
        skipBlanks()
        guard index < bytes.count else { throw Failure() }
        switch bytes[index] {
        case UInt8(ascii: "["):
            return .list(try parseSequence(closing: UInt8(ascii: "]"), depth: depth))
        case UInt8(ascii: "{"):
            return .tuple(try parseSequence(closing: UInt8(ascii: "}"), depth: depth))
        case UInt8(ascii: "\""):
            return .string(try parseQuoted(UInt8(ascii: "\"")))
        case UInt8(ascii: "'"):
            return .atom(try parseQuoted(UInt8(ascii: "'")))
        case UInt8(ascii: "a")...UInt8(ascii: "z"):
            let start = index
            while index < bytes.count, Self.isNameByte(bytes[index]) { index += 1 }
            return .atom(String(decoding: bytes[start..<index], as: UTF8.self))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = index
            index += 1
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard let value = Int(String(decoding: bytes[start..<index], as: UTF8.self)) else { throw Failure() }
            return .integer(value)
        default:
            throw Failure()
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "@"):
            return true
        default: return false
        }
    }

    private mutating func parseSequence(closing: UInt8, depth: Int) throws(Failure) -> [ConfigTerm] {
        index += 1
        var items: [ConfigTerm] = []
        skipBlanks()
        if index < bytes.count, bytes[index] == closing {
            index += 1
            return items
        }
        while true {
            items.append(try parse(depth: depth + 1))
            skipBlanks()
            guard index < bytes.count else { throw Failure() }
            if bytes[index] == closing {
                index += 1
                return items
            }
            guard bytes[index] == UInt8(ascii: ",") else { throw Failure() }
            index += 1
        }
    }

    /// A quoted string or atom with Erlang's escapes (`\n`, `\t`, `\\`, `\"`, `\d` for DEL,
    /// octal `\101`, `\x41`, `\x{263A}`, `\^A`…).
    private mutating func parseQuoted(_ quote: UInt8) throws(Failure) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var pending: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: pending, as: UTF8.self).unicodeScalars)
            pending.removeAll()
        }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == quote {
                flush()
                return String(scalars)
            }
            guard byte == UInt8(ascii: "\\") else {
                pending.append(byte)
                continue
            }
            guard index < bytes.count else { throw Failure() }
            flush()
            let escaped = bytes[index]
            index += 1
            let simple: [UInt8: UInt32] = [
                UInt8(ascii: "b"): 8, UInt8(ascii: "d"): 127, UInt8(ascii: "e"): 27, UInt8(ascii: "f"): 12,
                UInt8(ascii: "n"): 10,
                UInt8(ascii: "r"): 13, UInt8(ascii: "s"): 32, UInt8(ascii: "t"): 9, UInt8(ascii: "v"): 11,
            ]
            var code: UInt32
            if let value = simple[escaped] {
                code = value
            } else if (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(escaped) {
                code = UInt32(escaped - UInt8(ascii: "0"))
                var digits = 1
                while digits < 3, index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(bytes[index]) {
                    code = code * 8 + UInt32(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                    digits += 1
                }
            } else if escaped == UInt8(ascii: "x") {
                let braced = index < bytes.count && bytes[index] == UInt8(ascii: "{")
                if braced { index += 1 }
                let start = index
                while index < bytes.count, braced || index - start < 2,
                    Character(Unicode.Scalar(bytes[index])).isHexDigit
                { index += 1 }
                guard index > start, index - start <= 8,
                    let value = UInt32(String(decoding: bytes[start..<index], as: UTF8.self), radix: 16)
                else { throw Failure() }
                if braced {
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else { throw Failure() }
                    index += 1
                }
                code = value
            } else if escaped == UInt8(ascii: "^") {
                guard index < bytes.count else { throw Failure() }
                code = UInt32(bytes[index] & 0x1F)
                index += 1
            } else if escaped < 0x80 {
                code = UInt32(escaped)  // `\\`, `\"`, `\'` and any other character stand for themselves
            } else {
                index -= 1
                continue
            }
            guard let scalar = Unicode.Scalar(code) else { throw Failure() }
            scalars.append(scalar)
        }
        throw Failure()
    }
}
