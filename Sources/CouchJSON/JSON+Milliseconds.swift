import Foundation

extension JSON {
    /// A time in milliseconds since 1970 as the original Location Tracker wrote its timestamps
    /// (JavaScript's `Date.now()`): a JSON integer when whole, a number with a fraction only when
    /// it has one.
    public static func milliseconds(_ value: Double) -> JSON {
        value.rounded() == value && abs(value) < 9e15 ? .int(Int(value)) : .double(value)
    }

    /// Now, in whole milliseconds since 1970.
    public static func millisecondsNow() -> JSON {
        milliseconds((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
