/// Finds the elements of chosen arrays in a JSON document read piece by piece, never holding
/// more than one element: `{"locations": [ {...}, {...} ]}` with the path `["locations"]`
/// gives each `{...}` as its bytes, in order, as the pieces arrive. A path is the object
/// members leading from the top to the array (`[]`: the document is the array). Everything
/// else in the document is skimmed, not kept.
///
/// Bounded whatever the input: an element larger than `maxElementBytes`, a member name longer
/// than `maxKeyBytes` or nesting deeper than `maxDepth` is an error naming the byte where it
/// happened, as is a document that is not JSON's shape (a stray bracket, a truncated end).
/// Scalars and strings inside elements are not checked here: the element's own parse is.
public struct JSONElementStream: Sendable {
    /// One element of a chosen array.
    public struct Element: Sendable {
        /// Which of the paths it came from (an index into `paths`).
        public var path: Int
        public var bytes: [UInt8]
        /// Where its first byte is in the document.
        public var offset: Int
    }

    /// Why the document cannot be read, and where.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        /// The byte of the document where it was found.
        public var offset: Int
        public var description: String { "\(reason) at byte \(offset)" }
    }

    public let paths: [[String]]
    public var maxElementBytes = 16 << 20
    public var maxKeyBytes = 4096
    public var maxDepth = 256

    private struct Frame: Sendable {
        var isArray: Bool
        /// The members from the top to this container, while it is on a chosen path's way.
        var path: [String]?
        /// For an object: the next string is a member name.
        var expectingKey = false
        /// The member whose value comes next.
        var key: [UInt8] = []
        /// The chosen array this is, if it is one.
        var chosen: Int?
    }

    private var frames: [Frame] = []
    /// Bytes read so far.
    public private(set) var offset = 0
    private var inString = false
    private var escaped = false
    /// The string being read is a member name, kept in `keyBytes`.
    private var readingKey = false
    private var keyBytes: [UInt8] = []
    /// The element being captured: its bytes, its depth (`frames.count` when it began), its path.
    private var element: [UInt8] = []
    private var elementDepth: Int?
    private var elementPath = 0
    private var elementStart = 0
    /// Whether a scalar element (a number, `true`...) is being captured: it ends at a delimiter.
    private var scalarElement = false
    private var sawValue = false
    /// The previous byte was part of a number or a literal.
    private var inScalar = false
    /// The piece being read (only during `feed`), the byte at hand, and where the bytes of the
    /// element being captured that are not copied yet begin in it.
    // Unsafe only in name: it points into the caller's bytes during `feed` and is emptied when it returns.
    nonisolated(unsafe) private var chunk = UnsafeRawBufferPointer(start: nil, count: 0)
    private var index = 0
    private var runStart: Int?

    public init(paths: [[String]]) {
        self.paths = paths
    }

    /// Reads the next piece, calling `emit` for each element it completes.
    public mutating func feed(_ bytes: some Collection<UInt8>, emit: (Element) throws -> Void) throws {
        try Array(bytes).withUnsafeBytes { try feed($0, emit: emit) }
    }

    /// Reads the next piece, calling `emit` for each element it completes. An element's bytes
    /// are copied a run at a time (when it ends, or the piece does), not byte by byte.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (Element) throws -> Void) throws {
        chunk = bytes
        defer { chunk = UnsafeRawBufferPointer(start: nil, count: 0) }
        let count = bytes.count
        index = 0
        if elementDepth != nil { runStart = 0 }
        while index < count {
            // The bulk of a document: the inside of strings, and indentation. Taken a run at a time.
            if inString, !escaped, !readingKey {
                var j = index
                while j < count, bytes[j] != UInt8(ascii: "\""), bytes[j] != UInt8(ascii: "\\") { j += 1 }
                if j > index {
                    try checkSize(upTo: j)
                    offset += j - index
                    index = j
                    continue
                }
            } else if !inString, bytes[index] == UInt8(ascii: " ") {
                var j = index
                while j < count, bytes[j] == UInt8(ascii: " ") { j += 1 }
                try checkSize(upTo: j)
                inScalar = false
                offset += j - index
                index = j
                continue
            }
            try checkSize(upTo: index + 1)
            try step(bytes[index], emit: emit)
            offset += 1
            index += 1
        }
        if elementDepth != nil { copyRun(upTo: count) }
        runStart = nil
    }

    /// An error unless the element being captured, with the piece's bytes before `end`, fits.
    private mutating func checkSize(upTo end: Int) throws {
        guard let runStart, element.count + (end - runStart) > maxElementBytes else { return }
        offset += runStart + (maxElementBytes - element.count) - index
        throw fail("An element is larger than \(maxElementBytes) bytes")
    }

    /// Copies the piece's bytes of the element being captured, up to `end`.
    private mutating func copyRun(upTo end: Int) {
        guard let start = runStart, end > start else { return }
        element.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[start..<end]))
        runStart = end
    }

    /// The end of the document: an error unless it was whole.
    public func finish() throws {
        if inString || !frames.isEmpty || elementDepth != nil {
            throw Failure(reason: "The document ends before its last value does (truncated?)", offset: offset)
        }
        if !sawValue { throw Failure(reason: "The document is empty", offset: offset) }
    }

    private mutating func fail(_ reason: String) -> Failure { Failure(reason: reason, offset: offset) }

    private mutating func step(_ byte: UInt8, emit: (Element) throws -> Void) throws {
        if inString {
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                inString = false
                if readingKey {
                    readingKey = false
                    frames[frames.count - 1].key = keyBytes
                    frames[frames.count - 1].expectingKey = false
                }
                return
            }
            if readingKey {
                guard keyBytes.count < maxKeyBytes else {
                    throw fail("A member name is longer than \(maxKeyBytes) bytes")
                }
                keyBytes.append(byte)
            }
            return
        }
        let scalarBefore = inScalar
        inScalar = false
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
            return
        case UInt8(ascii: "\""):
            if elementDepth == nil, let last = frames.last, !last.isArray, last.expectingKey {
                readingKey = true
                keyBytes.removeAll(keepingCapacity: true)
            } else {
                try valueBegins(byte)
            }
            inString = true
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try valueBegins(byte)
            guard frames.count < maxDepth else { throw fail("Values nest deeper than \(maxDepth) levels") }
            var frame = Frame(isArray: byte == UInt8(ascii: "["))
            frame.expectingKey = !frame.isArray
            if elementDepth == nil {
                if frames.isEmpty {
                    frame.path = []
                } else if let parent = frames.last, !parent.isArray, let path = parent.path {
                    let member = path + [String(decoding: parent.key, as: UTF8.self)]
                    if paths.contains(where: { $0.count >= member.count && Array($0.prefix(member.count)) == member }) {
                        frame.path = member
                    }
                }
                if frame.isArray, let path = frame.path { frame.chosen = paths.firstIndex(of: path) }
            }
            frames.append(frame)
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            try endScalarElement(emit)
            guard let last = frames.popLast(), last.isArray == (byte == UInt8(ascii: "]")) else {
                throw fail("A closing \(Character(UnicodeScalar(byte))) that closes nothing open")
            }
            if let depth = elementDepth, frames.count == depth {
                copyRun(upTo: index + 1)
                try emitElement(emit)
            }
        case UInt8(ascii: ","):
            try endScalarElement(emit)
            guard let last = frames.last else { throw fail("A comma outside any array or object") }
            if !last.isArray { frames[frames.count - 1].expectingKey = true }
        case UInt8(ascii: ":"):
            guard let last = frames.last, !last.isArray else { throw fail("A colon outside an object") }
        default:
            // A number, `true`, `false`, `null`: skimmed, or captured from its first byte.
            inScalar = true
            if !scalarBefore { try valueBegins(byte) }
        }
    }

    /// A value starts: the top-level value, or an element of a chosen array to capture.
    private mutating func valueBegins(_ byte: UInt8) throws {
        if frames.isEmpty {
            if sawValue { throw fail("More than one value in the document") }
            sawValue = true
        }
        guard elementDepth == nil, let last = frames.last, last.isArray, let chosen = last.chosen else { return }
        elementDepth = frames.count
        elementPath = chosen
        elementStart = offset
        element.removeAll(keepingCapacity: true)
        runStart = index
        scalarElement = byte != UInt8(ascii: "{") && byte != UInt8(ascii: "[")
    }

    private mutating func endScalarElement(_ emit: (Element) throws -> Void) throws {
        guard scalarElement, let depth = elementDepth, frames.count == depth else { return }
        copyRun(upTo: index)  // not the delimiter
        try emitElement(emit)
    }

    private mutating func emitElement(_ emit: (Element) throws -> Void) throws {
        let done = Element(path: elementPath, bytes: element, offset: elementStart)
        elementDepth = nil
        scalarElement = false
        runStart = nil
        try emit(done)
    }
}
