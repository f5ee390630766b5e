import CouchJSON
import Crypto
import Foundation

/// New revision ids computed with CouchDB's own formula, so the same edit made on lt and on
/// Apache CouchDB gets the same revision id.
///
/// CouchDB (`couch_db:new_revid/1`) hashes, with MD5, Erlang's external term format
/// (`term_to_binary(…, [{minor_version, 1}])`) of
/// `[Deleted, ParentPos, ParentRev, Body, Attachments]`, where `Body` is the document as jiffy
/// decodes it (objects as `{[{Key, Value}]}`, strings as binaries, `true`/`false`/`null` as
/// atoms), `ParentRev` is the parent's 16 hash bytes (or `0` for a new document) and
/// `Attachments` lists `{Name, ContentType, MD5}` in the reverse of the document's order.
enum CouchRevisionID {
    /// The 32 hex digits of a new revision's hash.
    static func hash(deleted: Bool, parent: Revision?, body: JSONObject, attachments: JSONObject?) -> String {
        var term = ErlangTerm()
        term.bytes.reserveCapacity(512)
        term.bytes.append(131)  // version
        term.listHeader(count: 5)
        term.atom(deleted ? "true" : "false")
        term.integer(Int64(parent?.pos ?? 0))
        if let parent {
            term.binary(parentHashBytes(parent.hash))
        } else {
            term.integer(0)
        }
        term.object(body)
        let digested = (attachments?.members ?? []).reversed().compactMap { name, meta -> (String, String, [UInt8])? in
            guard let digest = meta["digest"]?.stringValue, digest.hasPrefix("md5-"),
                let md5 = Data(base64Encoded: String(digest.dropFirst(4)))
            else { return nil }
            return (name, meta["content_type"]?.stringValue ?? "application/octet-stream", Array(md5))
        }
        if digested.isEmpty {
            term.bytes.append(ErlangTerm.nil)
        } else {
            term.listHeader(count: digested.count)
            for (name, type, md5) in digested {
                term.tupleHeader(arity: 3)
                term.binary(name)
                term.binary(type)
                term.binary(md5)
            }
            term.bytes.append(ErlangTerm.nil)
        }
        term.bytes.append(ErlangTerm.nil)
        return Hex.string(Insecure.MD5.hash(data: term.bytes))
    }

    /// CouchDB keeps a 32-hex-digit revision hash as its 16 bytes and any other as its text.
    static func parentHashBytes(_ hash: String) -> [UInt8] {
        let utf8 = Array(hash.utf8)
        guard utf8.count == 32 else { return utf8 }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        var index = 0
        while index < 32 {
            guard let high = hexValue(utf8[index]), let low = hexValue(utf8[index + 1]) else { return utf8 }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Erlang's external term format, as much of it as a decoded JSON document needs.
struct ErlangTerm {
    static let `nil`: UInt8 = 106
    var bytes: [UInt8] = []

    mutating func value(_ json: JSON) {
        switch json {
        case .null: atom("null")
        case let .bool(b): atom(b ? "true" : "false")
        case let .int(i): integer(Int64(i))
        case let .double(d): float(d)
        case let .string(s): binary(s)
        case let .object(o): object(o)
        case let .array(items): list(items)
        }
    }

    /// jiffy's `{[{Key, Value}, …]}`.
    mutating func object(_ object: JSONObject) {
        tupleHeader(arity: 1)
        if object.members.isEmpty {
            bytes.append(Self.nil)
            return
        }
        listHeader(count: object.members.count)
        for (key, member) in object.members {
            tupleHeader(arity: 2)
            binary(key)
            value(member)
        }
        bytes.append(Self.nil)
    }

    mutating func list(_ items: [JSON]) {
        if items.isEmpty {
            bytes.append(Self.nil)
            return
        }
        // A list of small integers is written as a string (STRING_EXT).
        if items.count <= 0xFFFF,
            items.allSatisfy({
                if case let .int(i) = $0 { return (0...255).contains(i) }; return false
            })
        {
            bytes.append(107)
            append16(UInt16(items.count))
            for case let .int(i) in items { bytes.append(UInt8(i)) }
            return
        }
        listHeader(count: items.count)
        for item in items { value(item) }
        bytes.append(Self.nil)
    }

    mutating func atom(_ name: String) {
        bytes.append(100)  // ATOM_EXT, latin-1 (minor_version 1)
        append16(UInt16(name.utf8.count))
        bytes.append(contentsOf: name.utf8)
    }

    mutating func integer(_ i: Int64) {
        if (0...255).contains(i) {
            bytes.append(97)
            bytes.append(UInt8(i))
        } else if (Int64(Int32.min)...Int64(Int32.max)).contains(i) {
            bytes.append(98)
            append32(UInt32(bitPattern: Int32(i)))
        } else {
            // SMALL_BIG_EXT: digit count, sign, little-endian magnitude.
            var magnitude = i.magnitude
            var digits: [UInt8] = []
            while magnitude > 0 {
                digits.append(UInt8(magnitude & 0xFF))
                magnitude >>= 8
            }
            bytes.append(110)
            bytes.append(UInt8(digits.count))
            bytes.append(i < 0 ? 1 : 0)
            bytes.append(contentsOf: digits)
        }
    }

    mutating func float(_ d: Double) {
        bytes.append(70)  // NEW_FLOAT_EXT
        let bits = d.bitPattern
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
    }

    mutating func binary(_ data: [UInt8]) {
        bytes.append(109)
        append32(UInt32(data.count))
        bytes.append(contentsOf: data)
    }

    /// A string as jiffy decodes it: its UTF-8 bytes as a binary.
    mutating func binary(_ text: String) {
        bytes.append(109)
        append32(UInt32(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
    }

    mutating func listHeader(count: Int) {
        bytes.append(108)
        append32(UInt32(count))
    }

    mutating func tupleHeader(arity: UInt8) {
        bytes.append(104)
        bytes.append(arity)
    }

    private mutating func append16(_ v: UInt16) {
        bytes.append(UInt8(v >> 8))
        bytes.append(UInt8(v & 0xFF))
    }

    private mutating func append32(_ v: UInt32) {
        for shift in [24, 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }
}
