import CZlib

/// The files inside a ZIP archive (a Google Takeout download), read front to back as its bytes
/// arrive: an upload cannot seek to the directory at the archive's end, so each entry is read
/// from its local header, its data inflated (zlib, raw deflate) or passed through (stored), and
/// its CRC-32 checked. Entries written by streaming zippers (sizes after the data, "data
/// descriptors", 32- or 64-bit) are read too. The directory at the end is not needed and not read.
///
/// Memory is bounded: a header (at most 128 KiB of name and extra fields) and one 64 KiB window
/// of inflated data at a time, whatever the archive's or an entry's size.
public struct ZipEntries: Sendable {
    /// What the reader found next.
    public enum Event {
        /// A file entry starts (directories are not reported).
        case begin(name: String)
        /// The next piece of the current entry's content.
        case data(UnsafeRawBufferPointer)
        /// The current entry ended whole (its CRC-32 matched).
        case end
    }

    /// Why the archive cannot be read further, and at which byte of it.
    public struct Failure: Error, Sendable, Equatable {
        public var reason: String
        public var offset: Int
    }

    /// The local file header's signature, `PK\u{3}\u{4}`: how a ZIP archive starts.
    public static let localHeader: [UInt8] = [0x50, 0x4B, 0x03, 0x04]
    private static let descriptorSignature: UInt32 = 0x0807_4B50
    /// Signatures of what follows the last entry: the central directory, the end records, a signature.
    private static let trailers: Set<UInt32> = [0x0201_4B50, 0x0605_4B50, 0x0606_4B50, 0x0706_4B50, 0x0505_4B50]
    static let window = 64 << 10

    private enum Phase: Sendable {
        /// Gathering a local header (fixed part, then name and extra fields).
        case header
        /// Copying a stored entry's remaining bytes.
        case stored(remaining: Int)
        /// Inflating an entry; `remaining` when its compressed size is known.
        case deflated(remaining: Int?)
        /// Passing over an entry's remaining bytes unread.
        case skipping(remaining: Int)
        /// Gathering the data descriptor that follows an entry written by a streaming zipper.
        case descriptor
        /// The directory at the end was reached: nothing more is read.
        case done
    }

    /// What the current entry's header said.
    private struct Entry: Sendable {
        var name: String
        var crc: UInt32
        var hasDescriptor: Bool
        var zip64: Bool
        var wanted = true
        /// Where its data starts in the archive.
        var dataStart = 0
        var computedCRC: UInt = 0
        /// Every byte of its content went through the CRC (not so when passed over unread).
        var checksummed = true
    }

    private var phase = Phase.header
    private var head: [UInt8] = []
    private var entry: Entry?
    private let inflater: Inflater
    /// Bytes of the archive read so far (advanced as each byte is taken, so an error names
    /// the same byte whatever the pieces the archive arrived in).
    public private(set) var offset = 0

    public init() {
        inflater = Inflater()
    }

    /// Reads the next piece of the archive. `handle` is called for each event; returning false
    /// from `.begin` or `.data` asks for no more of that entry (it is passed over, inflated
    /// without being handed on when its size is not written before it).
    public mutating func feed(_ input: UnsafeRawBufferPointer, _ handle: (Event) throws -> Bool) throws {
        var at = 0
        while at < input.count {
            let rest = UnsafeRawBufferPointer(rebasing: input[at...])
            let used: Int
            switch phase {
            case .done:
                used = rest.count
                offset += used
            case .header:
                used = try readHeader(rest, handle)
            case let .stored(remaining):
                let piece = UnsafeRawBufferPointer(rebasing: rest.prefix(remaining))
                entry!.computedCRC = crc32(entry!.computedCRC, piece.baseAddress, UInt32(piece.count))
                used = piece.count
                offset += used
                phase = .stored(remaining: remaining - used)
                if entry!.wanted { entry!.wanted = try handle(.data(piece)) }
                if remaining == used { try endData(handle) }
            case let .skipping(remaining):
                used = min(remaining, rest.count)
                offset += used
                phase = .skipping(remaining: remaining - used)
                if remaining == used { try endData(handle) }
            case let .deflated(remaining):
                used = try inflate(UnsafeRawBufferPointer(rebasing: rest.prefix(remaining ?? rest.count)), handle)
            case .descriptor:
                used = try readDescriptor(rest, handle)
            }
            at += used
        }
    }

    /// The end of the archive: an error when it stops inside an entry or before its directory.
    public func finish() throws {
        switch phase {
        case .done: return
        case .header where head.isEmpty && entry == nil:
            throw Failure(reason: "The archive ends before its directory: it was cut short", offset: offset)
        default:
            throw Failure(
                reason:
                    "The archive ends inside \(entry.map { "the entry \($0.name)" } ?? "a header"): it was cut short",
                offset: offset)
        }
    }

    // MARK: Headers

    private mutating func gather(_ rest: UnsafeRawBufferPointer, upTo count: Int) -> Int {
        let take = min(count - head.count, rest.count)
        if take > 0 {
            head += rest.prefix(take)
            offset += take
        }
        return max(take, 0)
    }

    private func word(_ at: Int) -> UInt32 {
        UInt32(head[at]) | UInt32(head[at + 1]) << 8 | UInt32(head[at + 2]) << 16 | UInt32(head[at + 3]) << 24
    }
    private func half(_ at: Int) -> Int { Int(head[at]) | Int(head[at + 1]) << 8 }
    private func long(_ at: Int) -> UInt64 { UInt64(word(at)) | UInt64(word(at + 4)) << 32 }

    private mutating func readHeader(_ rest: UnsafeRawBufferPointer, _ handle: (Event) throws -> Bool) throws -> Int {
        var used = gather(rest, upTo: 4)
        guard head.count >= 4 else { return used }
        let signature = word(0)
        if Self.trailers.contains(signature) {
            phase = .done
            head = []
            return used
        }
        guard signature == 0x0403_4B50 else {
            throw Failure(reason: "Not a ZIP entry header (the archive is damaged)", offset: offset - head.count)
        }
        used += gather(UnsafeRawBufferPointer(rebasing: rest[used...]), upTo: 30)
        guard head.count >= 30 else { return used }
        let total = 30 + half(26) + half(28)
        used += gather(UnsafeRawBufferPointer(rebasing: rest[used...]), upTo: total)
        guard head.count >= total else { return used }
        try startEntry(handle)
        return used
    }

    private mutating func startEntry(_ handle: (Event) throws -> Bool) throws {
        let start = offset - head.count
        let flags = half(6)
        let method = half(8)
        let nameLength = half(26)
        let name = String(decoding: head[30..<30 + nameLength], as: UTF8.self)
        var compressed = UInt64(word(18))
        var zip64 = false
        // The ZIP64 extra field holds the sizes the header's 32-bit fields could not.
        var extra = 30 + nameLength
        while extra + 4 <= head.count {
            let id = half(extra)
            let size = half(extra + 2)
            if id == 0x0001 {
                zip64 = true
                // Within the field as declared and the header as read (a field may claim more).
                let end = min(extra + 4 + size, head.count)
                var field = extra + 4
                if word(22) == UInt32.max, field + 8 <= end { field += 8 }
                if word(18) == UInt32.max, field + 8 <= end { compressed = long(field) }
            }
            extra += 4 + size
        }
        let hasDescriptor = flags & 0x08 != 0
        let crc = word(14)
        head = []
        guard compressed <= UInt64(Int.max) else {
            throw Failure(reason: "The entry \(name) claims an impossible size", offset: start)
        }
        let size = Int(compressed)
        var current = Entry(
            name: name, crc: crc, hasDescriptor: hasDescriptor, zip64: zip64,
            dataStart: offset)
        let sizeKnown = !hasDescriptor || size > 0
        let isDirectory = name.hasSuffix("/")
        if flags & 0x01 != 0 || isDirectory || method != 0 && method != 8 {
            guard sizeKnown || isDirectory else {
                throw Failure(
                    reason:
                        "The entry \(name) is \(flags & 0x01 != 0 ? "encrypted" : "compressed with method \(method)") "
                        + "and its size is not written before it: unzip the archive and import its folder",
                    offset: start)
            }
            if !isDirectory {
                _ = try handle(.begin(name: name))
                current.wanted = false
            }
            current.checksummed = false
            entry = current
            phase = .skipping(remaining: size)
            if size == 0 { try endData(handle) }
            return
        }
        entry = current
        entry!.wanted = try handle(.begin(name: name))
        if method == 0 {
            guard sizeKnown else {
                throw Failure(
                    reason: "The entry \(name) is stored with its size after it, which cannot be read as a stream: "
                        + "unzip the archive and import its folder",
                    offset: start)
            }
            phase = .stored(remaining: size)
            if size == 0 { try endData(handle) }
        } else {
            try inflater.reset()
            phase = .deflated(remaining: sizeKnown ? size : nil)
        }
    }

    // MARK: Data

    private mutating func inflate(_ input: UnsafeRawBufferPointer, _ handle: (Event) throws -> Bool) throws -> Int {
        var used = 0
        var ended = false
        while !ended {
            let step: Inflater.Step
            do {
                step = try inflater.inflate(UnsafeRawBufferPointer(rebasing: input[used...]))
            } catch {
                // Where zlib stops reading depends on the pieces it is given: the byte named is
                // where the entry's data starts, the same however the archive arrived.
                throw Failure(reason: "The entry \(entry!.name) is damaged (\(error))", offset: entry!.dataStart)
            }
            used += step.consumed
            offset += step.consumed
            ended = step.ended
            if step.produced > 0 {
                let output = inflater.output(step.produced)
                entry!.computedCRC = crc32(entry!.computedCRC, output.baseAddress, UInt32(output.count))
                if entry!.wanted { entry!.wanted = try handle(.data(output)) }
            }
            // A full window may leave more output inside zlib; otherwise it wants more input.
            if step.produced < ZipEntries.window && used == input.count || step.consumed == 0 && step.produced == 0 {
                break
            }
        }
        if case let .deflated(remaining?) = phase {
            if !ended && !entry!.wanted && remaining > used {
                // Nothing more of it is wanted and its end is known: pass over the rest unread.
                entry!.checksummed = false
                phase = .skipping(remaining: remaining - used)
                return used
            }
            phase = .deflated(remaining: remaining - used)
            if !ended && remaining == used {
                throw Failure(
                    reason: "The entry \(entry!.name) ends before its compressed data does", offset: offset)
            }
            if ended && remaining != used {
                throw Failure(
                    reason: "The entry \(entry!.name) holds more than its compressed data", offset: offset)
            }
        }
        if ended { try endData(handle) }
        return used
    }

    /// The entry's data has been read: its descriptor follows, or it is checked and ended.
    private mutating func endData(_ handle: (Event) throws -> Bool) throws {
        if entry!.hasDescriptor {
            phase = .descriptor
        } else {
            try endEntry(handle)
        }
    }

    private mutating func readDescriptor(_ rest: UnsafeRawBufferPointer, _ handle: (Event) throws -> Bool) throws -> Int
    {
        var used = gather(rest, upTo: 4)
        guard head.count >= 4 else { return used }
        let signed = word(0) == Self.descriptorSignature
        let total = (signed ? 8 : 4) + (entry!.zip64 ? 16 : 8)
        used += gather(UnsafeRawBufferPointer(rebasing: rest[used...]), upTo: total)
        guard head.count >= total else { return used }
        entry!.crc = word(signed ? 4 : 0)
        head = []
        try endEntry(handle)
        return used
    }

    private mutating func endEntry(_ handle: (Event) throws -> Bool) throws {
        let current = entry!
        entry = nil
        phase = .header
        if current.name.hasSuffix("/") { return }
        // A passed-over entry's content was not all read, so its CRC cannot be checked.
        if current.checksummed, UInt32(truncatingIfNeeded: current.computedCRC) != current.crc {
            throw Failure(reason: "The entry \(current.name) is damaged (its CRC-32 does not match)", offset: offset)
        }
        _ = try handle(.end)
    }
}

/// One zlib raw-deflate stream and its output window. A class: zlib keeps pointers into its
/// `z_stream`, which must not move.
final class Inflater: @unchecked Sendable {
    struct Step {
        var consumed: Int
        var produced: Int
        var ended: Bool
    }

    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var message: String?
        var description: String { "zlib error \(code)\(message.map { ": \($0)" } ?? "")" }
    }

    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let window = UnsafeMutableRawBufferPointer.allocate(byteCount: ZipEntries.window, alignment: 1)
    private var started = false

    init() {
        stream.initialize(to: z_stream())
    }

    deinit {
        if started { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        window.deallocate()
    }

    /// Readies the stream for the next entry.
    func reset() throws {
        let code = started ? inflateReset(stream) : lt_inflate_init_raw(stream)
        guard code == Z_OK else { throw Failure(code: code, message: nil) }
        started = true
    }

    /// Inflates from `input` into the window (which the previous step's output may be read from until then).
    func inflate(_ input: UnsafeRawBufferPointer) throws -> Step {
        stream.pointee.next_in = UnsafeMutablePointer(
            mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(min(input.count, Int(UInt32.max)))
        stream.pointee.next_out = window.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = UInt32(window.count)
        let before = stream.pointee.avail_in
        let code = CZlib.inflate(stream, Z_NO_FLUSH)
        let step = Step(
            consumed: Int(before - stream.pointee.avail_in), produced: window.count - Int(stream.pointee.avail_out),
            ended: code == Z_STREAM_END)
        switch code {
        case Z_OK, Z_STREAM_END: return step
        case Z_BUF_ERROR: return step  // no progress possible until more input arrives
        default: throw Failure(code: code, message: stream.pointee.msg.map { String(cString: $0) })
        }
    }

    /// The first `count` bytes the last step produced.
    func output(_ count: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: window.prefix(count))
    }
}
