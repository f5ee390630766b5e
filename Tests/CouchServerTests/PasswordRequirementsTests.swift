@testable import CouchServer
import CouchJSON
import Testing

/// `[couch_httpd_auth] password_regexp` read as CouchDB reads it (`couch_util:parse_term`).
@Suite("Password rules from the configuration")
struct PasswordRequirementsTests {
    func parse(_ text: String) -> ConfigTerm? {
        var parser = ConfigTermParser(text)
        return try? parser.parseWhole()
    }

    @Test("Erlang terms: lists, tuples, strings with Erlang's escapes, atoms, integers; nothing after the term; nesting bounded")
    func terms() {
        #expect(parse(#" [ {"a", "b"} , "c", ok, 'Quoted atom', -12, [] ] "#)
            == .list([.tuple([.string("a"), .string("b")]), .string("c"), .atom("ok"), .atom("Quoted atom"), .integer(-12), .list([])]))
        #expect(parse(#""\\d\"\n\t\101\x41\x{263A}\^A\d\s""#) == .string("\\d\"\n\tAA\u{263A}\u{1}\u{7F} "))
        #expect(parse(#""été 😀""#) == .string("été 😀"))
        for broken in [#"["a""#, #"["a",]"#, #"["a"] x"#, #"{"a" "b"}"#, "", "[", #""\x{110000}""#, #"["a"]."#] {
            #expect(parse(broken) == nil, "\(broken)")
        }
        #expect(parse(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)) != nil)
        #expect(parse(String(repeating: "[", count: 33) + String(repeating: "]", count: 33)) == nil)
        #expect(parse(String(repeating: "[", count: 100_000)) == nil)
    }

    @Test("Rules: every pattern must match somewhere in the password; the first unmet one's reason is given")
    func rules() throws {
        let rules = try PasswordRequirements(#"[{".{8,}", "Eight or more."}, "[0-9]", {"^[^ ]*$", ""}, {"x", 42}]"#)
        func problem(_ password: String) -> String? {
            do { try rules.check(password); return nil } catch { return error.reason }
        }
        #expect(problem("short1x") == "Password does not conform to requirements. Eight or more.")
        #expect(problem("longenough") == "Password does not conform to requirements.")
        #expect(problem("long enough 1x") == "Password does not conform to requirements.")
        #expect(problem("longenough1") == "Password does not conform to requirements.")
        #expect(problem("longenough1x") == nil)
        #expect(try PasswordRequirements(nil).rules.isEmpty && PasswordRequirements("[]").rules.isEmpty && PasswordRequirements("").rules.isEmpty)
        for broken in [#"{".{8,}"}"#, #"[{}]"#, #"[{"a","b","c"}]"#, #"[ok]"#, #"["("]"#, "not erlang"] {
            #expect(throws: PasswordRequirements.serverError) { try PasswordRequirements(broken) }
        }
    }
}
