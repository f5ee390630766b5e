import CouchJSON
@testable import CouchEngine
import Testing

/// The external term format as Erlang/OTP 25's `term_to_binary(T, [{minor_version, 1}])`
/// writes it (the expected bytes were printed by `erl`), for the values a JSON document holds.
@Suite("Erlang's external term format")
struct ErlangTermTests {
    func encoded(_ build: (inout ErlangTerm) -> Void) -> [UInt8] {
        var term = ErlangTerm()
        term.bytes.append(131)
        build(&term)
        return term.bytes
    }

    @Test("integers: small, 32-bit and big, both signs")
    func integers() {
        #expect(encoded { $0.integer(-5) } == [131, 98, 255, 255, 255, 251])
        #expect(encoded { $0.integer(5_000_000_000) } == [131, 110, 5, 0, 0, 242, 5, 42, 1])
        #expect(encoded { $0.integer(-5_000_000_000) } == [131, 110, 5, 1, 0, 242, 5, 42, 1])
        #expect(encoded { $0.integer(200) } == [131, 97, 200])
    }

    @Test("a document as jiffy decodes it, small-integer lists as strings")
    func document() throws {
        // term_to_binary([true, 0, 0, {[{<<"a">>,[1,2,300]}, {<<"b">>,1.5}, {<<"c">>,null}, {<<"d">>,[1,2]}]}, []], [{minor_version,1}])
        let expected: [UInt8] = [
            131, 108, 0, 0, 0, 5, 100, 0, 4, 116, 114, 117, 101, 97, 0, 97, 0, 104, 1, 108, 0, 0, 0, 4, 104, 2, 109, 0, 0,
            0, 1, 97, 108, 0, 0, 0, 3, 97, 1, 97, 2, 98, 0, 0, 1, 44, 106, 104, 2, 109, 0, 0, 0, 1, 98, 70, 63, 248, 0, 0,
            0, 0, 0, 0, 104, 2, 109, 0, 0, 0, 1, 99, 100, 0, 4, 110, 117, 108, 108, 104, 2, 109, 0, 0, 0, 1, 100, 107, 0,
            2, 1, 2, 106, 106, 106,
        ]
        let body = try #require(try JSON.parse(Array(#"{"a":[1,2,300],"b":1.5,"c":null,"d":[1,2]}"#.utf8)).objectValue)
        let bytes = encoded { term in
            term.listHeader(count: 5)
            term.atom("true")
            term.integer(0)
            term.integer(0)
            term.object(body)
            term.bytes.append(ErlangTerm.nil)
            term.bytes.append(ErlangTerm.nil)
        }
        #expect(bytes == expected)
    }

    @Test("a parent's 32 hex digits become its 16 bytes; any other hash stays text")
    func parentHash() {
        #expect(CouchRevisionID.parentHashBytes("23202479633c2b380f79507a776743d5")
            == [0x23, 0x20, 0x24, 0x79, 0x63, 0x3c, 0x2b, 0x38, 0x0f, 0x79, 0x50, 0x7a, 0x77, 0x67, 0x43, 0xd5])
        #expect(CouchRevisionID.parentHashBytes("abc") == Array("abc".utf8))
        #expect(CouchRevisionID.parentHashBytes("zz202479633c2b380f79507a776743d5") == Array("zz202479633c2b380f79507a776743d5".utf8))
    }

    @Test("the revision id of a new document is CouchDB's")
    func newDocument() throws {
        // Recorded from CouchDB 3.4.3: POST /db/_bulk_docs {"docs":[{"_id":"doc","a":2}]}
        let body = try #require(try JSON.parse(Array(#"{"a":2}"#.utf8)).objectValue)
        #expect(CouchRevisionID.hash(deleted: false, parent: nil, body: body, attachments: nil) == "3975759ccff3842adf690a5c10caee42")
    }
}
