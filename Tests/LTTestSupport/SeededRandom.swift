@_exported import struct TrackerKit.SeededGenerator

/// The deterministic generator property tests use (SplitMix64, TrackerKit's): a failing seed
/// can be replayed.
public typealias SeededRandom = SeededGenerator
