import CouchJSON

/// A `_geo_grid` request's parameters (a LocationTracker extension, for maps of many points):
/// `bbox` (`minLon,minLat,maxLon,maxLat`, the world when missing), `columns` and `rows` (1–200,
/// 16 by default), `from` and `to` (ms since 1970, on the points' times), `prefix` (on ids) and
/// `points` (0–5,000: also list the points when there are at most that many).
public struct GeoGridRequest: Sendable {
    public var box: BoundingBox
    public var columns = 16
    public var rows = 16
    public var from: Double?
    public var to: Double?
    public var idPrefix: String?
    public var pointLimit = 0

    public init(parameters query: [String: String]) throws(GeometryError) {
        do { box = try BoundingBox(parameter: query["bbox"] ?? "-180,-90,180,90") } catch let error as GeometryError {
            throw error
        } catch {
            throw GeometryError("bbox: \(error)")
        }
        func integer(_ name: String, _ fallback: Int, _ range: ClosedRange<Int>) throws(GeometryError) -> Int {
            guard let text = query[name] else { return fallback }
            guard let value = Int(text), range.contains(value) else {
                throw GeometryError("\(name) must be an integer in \(range.lowerBound)...\(range.upperBound)")
            }
            return value
        }
        func number(_ name: String) throws(GeometryError) -> Double? {
            guard let text = query[name] else { return nil }
            guard let value = Double(text), value.isFinite else {
                throw GeometryError("\(name) must be a number (ms since 1970)")
            }
            return value
        }
        columns = try integer("columns", 16, 1...200)
        rows = try integer("rows", 16, 1...200)
        from = try number("from")
        to = try number("to")
        idPrefix = query["prefix"]
        pointLimit = try integer("points", 0, 0...5000)
    }

    /// The grid of `index` this request asks for.
    public func grid(of index: SpatialIndex) -> GeoGrid {
        index.grid(box, columns: columns, rows: rows, from: from, to: to, idPrefix: idPrefix, pointLimit: pointLimit)
    }

    /// The answer: `{"total", "columns", "rows", "cells": [[row, column, count, lat, lon]],
    /// "points": [[lat, lon, id, time]], "bounds": [minLon, minLat, maxLon, maxLat] or null}`.
    public func json(_ grid: GeoGrid) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + grid.cells.count * 48 + grid.points.count * 64)
        out += #"{"total":\#(grid.total),"columns":\#(columns),"rows":\#(rows),"cells":["#.utf8
        for (i, cell) in grid.cells.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += "[\(cell.row),\(cell.column),\(cell.count),".utf8
            JSON.writeDouble(cell.center.lat, to: &out)
            out.append(UInt8(ascii: ","))
            JSON.writeDouble(cell.center.lon, to: &out)
            out.append(UInt8(ascii: "]"))
        }
        out += #"],"points":["#.utf8
        for (i, point) in grid.points.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            JSON.writeDouble(point.coordinate.lat, to: &out)
            out.append(UInt8(ascii: ","))
            JSON.writeDouble(point.coordinate.lon, to: &out)
            out.append(UInt8(ascii: ","))
            JSON.writeString(point.id, to: &out)
            out.append(UInt8(ascii: ","))
            if let time = point.time { JSON.writeDouble(time, to: &out) } else { out += "null".utf8 }
            out.append(UInt8(ascii: "]"))
        }
        out += #"],"bounds":"#.utf8
        if let bounds = grid.bounds {
            out.append(UInt8(ascii: "["))
            for (i, value) in [bounds.minLon, bounds.minLat, bounds.maxLon, bounds.maxLat].enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeDouble(value, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        } else {
            out += "null".utf8
        }
        out += "}\n".utf8
        return out
    }
}
