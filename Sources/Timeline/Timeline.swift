public import Geo

/// One position of a user's track, as the detector reads it.
public struct TrackFix: Sendable, Equatable {
    /// Milliseconds since 1970, UTC.
    public var time: Int64
    public var coordinate: Coordinate
    /// Horizontal accuracy in metres, when the device said.
    public var accuracy: Double?

    public init(time: Int64, latitude: Double, longitude: Double, accuracy: Double? = nil) {
        self.time = time
        coordinate = Coordinate(lon: longitude, lat: latitude)
        self.accuracy = accuracy
    }
}

/// A stay: the user was within `TimelineSettings.visitRadius` of `centre` from `start` to `end`.
public struct Visit: Sendable, Equatable {
    /// First and last position of the stay, ms since 1970.
    public var start: Int64
    public var end: Int64
    /// The mean of its positions.
    public var centre: Coordinate
    /// How far its positions are from the centre: the largest distance, in metres.
    public var spread: Double
    /// Positions it was found from.
    public var fixes: Int

    /// Seconds.
    public var duration: Double { Double(end - start) / 1000 }
}

/// How a trip was most likely made, guessed from its moving speed.
public enum TravelMode: String, Sendable, CaseIterable, Codable {
    case walking, cycling, driving
    case trainOrFlight = "train-or-flight"
}

/// A move between two visits (or before the first, or after the last).
public struct Trip: Sendable, Equatable {
    /// Its first and last positions' times, ms since 1970: the end of the visit before and the
    /// start of the visit after, when there are.
    public var start: Int64
    public var end: Int64
    public var from: Coordinate
    public var to: Coordinate
    /// Metres along the track.
    public var distance: Double
    /// Metres per second over the whole trip, stops included.
    public var averageSpeed: Double
    /// Metres per second while moving (stops at lights and stations left out): what the mode is guessed from.
    public var movingSpeed: Double
    /// The highest speed held between three positions in a row, metres per second (a single
    /// position thrown off by a reflection makes no spike).
    public var maxSpeed: Double
    public var mode: TravelMode
    /// Positions it was measured from.
    public var fixes: Int

    /// Seconds.
    public var duration: Double { Double(end - start) / 1000 }
}

/// A day as people remember it, in time order: visits, trips between them, and the gaps where
/// there is no data (the phone off, away from one place).
public enum TimelineEntry: Sendable, Equatable {
    case visit(Visit)
    case trip(Trip)
    /// No position between `start` and `end` (longer than `minimalNoDataDuration`), and the
    /// positions on either side are not at one place.
    case gap(start: Int64, end: Int64)

    public var start: Int64 {
        switch self {
        case let .visit(visit): visit.start
        case let .trip(trip): trip.start
        case let .gap(start, _): start
        }
    }

    public var end: Int64 {
        switch self {
        case let .visit(visit): visit.end
        case let .trip(trip): trip.end
        case let .gap(_, end): end
        }
    }
}
