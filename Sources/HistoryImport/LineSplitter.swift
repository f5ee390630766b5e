/// Splits a file read piece by piece into lines (`\n`, `\r\n`), each given with the byte it
/// starts at and its number. A line longer than `maxLineBytes` is an error, not a buffer that
/// grows without end.
struct LineSplitter: Sendable {
    struct Failure: Error {
        var reason: String
    }

    var maxLineBytes = 1 << 20
    private var line: [UInt8] = []
    private var lineStart = 0
    private var offset = 0
    private var number = 1

    mutating func feed(
        _ bytes: UnsafeRawBufferPointer, line emit: (ArraySlice<UInt8>, _ offset: Int, _ number: Int) throws -> Void
    ) throws {
        for byte in bytes {
            offset += 1
            if byte == UInt8(ascii: "\n") {
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                try emit(line[...], lineStart, number)
                line.removeAll(keepingCapacity: true)
                lineStart = offset
                number += 1
            } else {
                guard line.count < maxLineBytes else {
                    throw HistoryReader.Failure(
                        reason: "A line longer than \(maxLineBytes) bytes", offset: lineStart, line: number)
                }
                line.append(byte)
            }
        }
    }

    mutating func finish(line emit: (ArraySlice<UInt8>, _ offset: Int, _ number: Int) throws -> Void) throws {
        if !line.isEmpty {
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            try emit(line[...], lineStart, number)
            line.removeAll()
        }
    }
}
