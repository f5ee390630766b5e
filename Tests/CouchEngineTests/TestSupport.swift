import CouchJSON
import CouchEngine
import Foundation
@_exported import LTTestSupport

func randomHash(_ rng: inout SeededRandom) -> String {
    Hex.string((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
}
