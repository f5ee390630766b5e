/// Times as history files write them: ISO 8601 / RFC 3339 (`2024-06-10T08:00:00.125+02:00`,
/// `...Z`, without seconds or fraction, `+0200`), read without Foundation's formatters (a
/// million of them a second).
public enum ISOTime {
    /// Milliseconds since 1970 (UTC) and the offset the text gave, in minutes (nil for `Z` or
    /// none: a time without an offset is taken as UTC). nil when it is not such a time.
    public static func parse(_ text: some StringProtocol) -> (milliseconds: Int64, offsetMinutes: Int?)? {
        parse(Array(text.utf8))
    }

    public static func parse(_ b: [UInt8]) -> (milliseconds: Int64, offsetMinutes: Int?)? {
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let d = Int(b[i]) - 48
                guard (0...9).contains(d) else { return nil }
                value = value * 10 + d
                i += 1
            }
            return value
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        guard i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " ") || b[i] == UInt8(ascii: "t") else {
            return nil
        }
        i += 1
        guard let hour = digits(2), expect(":"), let minute = digits(2), hour < 24, minute < 60 else { return nil }
        var second = 0
        var millis = 0
        if expect(":") {
            guard let s = digits(2), s <= 60 else { return nil }
            second = s
            if i < b.count, b[i] == UInt8(ascii: ".") || b[i] == UInt8(ascii: ",") {
                i += 1
                var scale = 100
                var any = false
                while i < b.count, (48...57).contains(b[i]) {
                    millis += Int(b[i] - 48) * scale
                    scale /= 10
                    i += 1
                    any = true
                }
                guard any else { return nil }
            }
        }
        var offset: Int?
        if i < b.count {
            switch b[i] {
            case UInt8(ascii: "Z"), UInt8(ascii: "z"):
                i += 1
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
                i += 1
                guard let hours = digits(2), hours <= 23 else { return nil }
                _ = expect(":")
                let minutes = i < b.count ? digits(2) : 0
                guard let minutes, minutes < 60 else { return nil }
                offset = sign * (hours * 60 + minutes)
            default:
                return nil
            }
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64((offset ?? 0) * 60)
        return (seconds * 1000 + Int64(millis), offset)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
