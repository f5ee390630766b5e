import CouchJSON
import Foundation
import LTTestSupport
import Testing

/// Doubles are written in their shortest round-trip form (as `description` gives it), integral
/// ones with a `.0`, non-finite ones as `null`; what is written reads back as the same value.
@Suite struct JSONNumberTests {
    @Test func writtenDoublesReadBackExactly() throws {
        var random = SeededRandom(seed: 42)
        var samples: [Double] = [0.1, -0.0001, 1e-300, .leastNonzeroMagnitude, 1.7976931348623157e308, 123456789012345678.0, 1e15, -1e16, 37.49453457, -122.30464079]
        for _ in 0..<5_000 {
            // Any bit pattern (finite), and coordinates as devices send them.
            let bits = Double(bitPattern: random.next())
            if bits.isFinite { samples.append(bits) }
            samples.append(Double(random.next() % 36_000_000_000) / 1e8 - 180)
        }
        for value in samples {
            let text = JSON.double(value).text
            guard let parsed = try? JSON.parse(text) else { Issue.record("\(value) written as \(text)"); continue }
            #expect(parsed.doubleValue == value, "\(value) written as \(text)")
            if value != value.rounded() || abs(value) >= 1e15 {
                #expect(text == value.description)
            } else {
                #expect(text.hasSuffix(".0"), "\(value) written as \(text)")
            }
        }
        #expect(JSON.double(.nan).text == "null")
        #expect(JSON.double(-.infinity).text == "null")
    }
}
