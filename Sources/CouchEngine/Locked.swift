public import Foundation

/// A value guarded by a lock, for state shared between tasks and GRDB's queues. Inlinable, so
/// that callers in other modules get code specialized to their value (unspecialized, every call
/// looked up its value's type metadata at run time).
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    @usableFromInline var value: Value

    public init(_ value: Value) { self.value = value }

    @inlinable
    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
