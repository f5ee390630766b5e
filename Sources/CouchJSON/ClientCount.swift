/// Counts that clients send (`skip`, `limit`, bookmark offsets), parsed so that no arithmetic
/// on them can overflow.
///
/// A count is a non-negative integer up to `ClientCount.largest`, 2^53 − 1 (the largest
/// integer every JSON reader holds exactly, and more rows than any database here holds);
/// larger ones are refused (400, naming the parameter) rather than wrapped or trapped on, and
/// the sum of a few counts always fits in an `Int`.
public enum ClientCount {
    /// The largest count accepted.
    public static let largest = (1 << 53) - 1

    /// What a refusal says of the accepted range.
    public static let range = "a non-negative integer up to \(largest)"

    /// A non-negative decimal count (`"25"`) up to `largest`; nil for anything else (a sign,
    /// a fraction, letters, nothing, too many digits).
    @inlinable
    public static func parse(_ text: some StringProtocol) -> Int? {
        var value = 0
        var digits = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            digits += 1
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            if value > largest { return nil }  // checked each digit: value * 10 never overflows
        }
        return digits > 0 ? value : nil
    }

    /// A count given as a JSON number: non-negative, integral and up to `largest`; nil otherwise.
    public static func from(_ json: JSON) -> Int? {
        switch json {
        case let .int(i) where (0...largest).contains(i): return i
        case let .double(d) where d >= 0 && d <= Double(largest) && d.rounded() == d: return Int(d)
        default: return nil
        }
    }
}
