/// Well-known text (the `g` parameter of `_geo`): `POINT`, `LINESTRING`, `POLYGON`,
/// `MULTIPOINT`, `MULTILINESTRING`, `MULTIPOLYGON`, `GEOMETRYCOLLECTION`, case-insensitive,
/// positions as `x y` = `lon lat` (extra ordinates are ignored). Errors say where parsing stopped.
public enum WKT {
    public static func parse(_ text: String) throws -> Geometry {
        var parser = Parser(bytes: Array(text.utf8))
        let geometry = try parser.geometry()
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the geometry") }
        return geometry
    }

    struct Parser {
        let bytes: [UInt8]
        var index = 0

        func error(_ message: String) -> GeometryError {
            GeometryError("Invalid WKT at character \(index + 1): \(message)")
        }

        mutating func skipSpace() {
            while index < bytes.count,
                bytes[index] == 32 || bytes[index] == 9 || bytes[index] == 10 || bytes[index] == 13
            { index += 1 }
        }

        mutating func word() -> String {
            skipSpace()
            let start = index
            while index < bytes.count, (bytes[index] | 0x20) >= 97, (bytes[index] | 0x20) <= 122 { index += 1 }
            return String(decoding: bytes[start..<index], as: UTF8.self).uppercased()
        }

        mutating func expect(_ byte: UInt8) throws {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else {
                throw error("expected '\(Character(UnicodeScalar(byte)))'")
            }
            index += 1
        }

        /// Consumes `byte` if it is next.
        mutating func accept(_ byte: UInt8) -> Bool {
            skipSpace()
            if index < bytes.count, bytes[index] == byte {
                index += 1
                return true
            }
            return false
        }

        mutating func number() throws -> Double {
            skipSpace()
            let start = index
            while index < bytes.count, "+-.0123456789eE".utf8.contains(bytes[index]) { index += 1 }
            guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
                throw error("expected a number")
            }
            return value
        }

        mutating func position() throws -> Coordinate {
            let x = try number()
            let y = try number()
            // Z and M ordinates are allowed and ignored.
            while true {
                skipSpace()
                guard index < bytes.count, "+-.0123456789".utf8.contains(bytes[index]) else { break }
                _ = try number()
            }
            let c = Coordinate(lon: x, lat: y)
            try c.validate()
            return c
        }

        /// `(a, b, ...)` of whatever `item` parses.
        mutating func list<T>(_ item: (inout Parser) throws -> T) throws -> [T] {
            try expect(UInt8(ascii: "("))
            var items = [try item(&self)]
            while accept(UInt8(ascii: ",")) { items.append(try item(&self)) }
            try expect(UInt8(ascii: ")"))
            return items
        }

        mutating func line(minimum: Int) throws -> [Coordinate] {
            let points = try list { try $0.position() }
            guard points.count >= minimum else { throw error("a line needs at least \(minimum) positions") }
            return points
        }

        mutating func polygon() throws -> [[Coordinate]] {
            let rings = try list { try $0.line(minimum: 4) }
            for ring in rings {
                do { try Geometry.validateRing(ring) } catch let e as GeometryError { throw error(e.reason) }
            }
            return rings
        }

        mutating func geometry() throws -> Geometry {
            let tag = word()
            switch word() {
            case "", "Z", "M", "ZM": break
            case "EMPTY": throw error("EMPTY geometries cannot be queried")
            default: throw error("unexpected word after \(tag)")
            }
            switch tag {
            case "POINT":
                let points = try list { try $0.position() }
                guard points.count == 1 else { throw error("a POINT has one position") }
                return .point(points[0])
            case "LINESTRING": return .lineString(try line(minimum: 2))
            case "POLYGON": return .polygon(try polygon())
            case "MULTIPOINT":
                // Both `MULTIPOINT (1 2, 3 4)` and `MULTIPOINT ((1 2), (3 4))`.
                return .multiPoint(
                    try list { parser in
                        if parser.accept(UInt8(ascii: "(")) {
                            let p = try parser.position()
                            try parser.expect(UInt8(ascii: ")"))
                            return p
                        }
                        return try parser.position()
                    })
            case "MULTILINESTRING": return .multiLineString(try list { try $0.line(minimum: 2) })
            case "MULTIPOLYGON": return .multiPolygon(try list { try $0.polygon() })
            case "GEOMETRYCOLLECTION": return .collection(try list { try $0.geometry() })
            case "": throw error("expected a geometry type such as POINT or POLYGON")
            default: throw error("unknown geometry type \(tag)")
            }
        }
    }
}
