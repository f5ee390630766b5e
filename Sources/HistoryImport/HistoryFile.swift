/// One uploaded file, whatever it holds: a location history in one of the formats, or a ZIP
/// archive of them (a Google Takeout download, a folder of monthly files zipped), read as a
/// stream. Each file, or each entry of an archive, is recognised by its first bytes
/// (`HistoryFormat.detect`) and read by a `HistoryReader`. In an archive, entries that are not
/// location histories (Takeout's settings, other products' files) are passed over and counted,
/// and an entry that cannot be read to its end is reported while the others are read.
public struct HistoryFile: Sendable {
    /// A file refused before any location was read: not a location history this reads.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// One entry of an archive that held, or was taken for, a location history.
    public struct Entry: Sendable, Equatable {
        public var name: String
        public var format: HistoryFormat
        /// Locations read from it.
        public var locations = 0
        /// Why it was not read to its end.
        public var error: String?
    }

    /// How many of an archive's entries are listed (the rest are counted only).
    public static let listedEntries = 500
    static let notHistory = "archive entries that are not a location history"
    static let unreadable = "archive entries that could not be read to their end"

    private let forcedFormat: HistoryFormat?
    private let columns: CSVColumns.Names?
    /// Bytes of the file read so far (of the archive, for an archive).
    public private(set) var bytesRead = 0
    /// The format of a plain file, once its first bytes have been seen.
    public private(set) var format: HistoryFormat?
    /// Whether the file is a ZIP archive (known once its first four bytes have been seen).
    public private(set) var isArchive = false
    /// An archive's entries that were location histories, in order (the first `listedEntries`).
    public private(set) var entries: [Entry] = []
    private var counts: [String: Int] = [:]
    /// Entries of the file that gave no location, by reason (and, for an archive, entries passed over).
    public var skipped: [String: Int] {
        var all = counts
        if let current = current?.reader { all.merge(current.skipped, uniquingKeysWith: +) }
        return all
    }

    private var start: [UInt8] = []
    private var zip: ZipEntries?
    /// The plain file's or the current entry's reading.
    private var current: Current?

    private struct Current: Sendable {
        var name: String?
        var start: [UInt8] = []
        var reader: HistoryReader?
        /// The entry is not a history, or failed: the rest of it is not read.
        var ignored = false
        var locations = 0
    }

    /// - Parameters:
    ///   - format: the format every file or entry is read as, when detection should not decide.
    ///   - columns: for CSV, the columns to read (found by name in the header when nil).
    public init(format: HistoryFormat? = nil, columns: CSVColumns.Names? = nil) {
        forcedFormat = format
        self.columns = columns
    }

    /// Reads the next piece of the file, calling `emit` for every location it completes with
    /// the format of the file or entry that held it.
    public mutating func feed(
        _ bytes: UnsafeRawBufferPointer, emit: (ImportedLocation, HistoryFormat) throws -> Void
    ) throws {
        defer { bytesRead += bytes.count }
        if zip == nil && current == nil {
            let take = min(ZipEntries.localHeader.count - start.count, bytes.count)
            start += bytes.prefix(take)
            guard start.count >= ZipEntries.localHeader.count else { return }
            let head = start
            start = []
            if head == ZipEntries.localHeader {
                isArchive = true
                zip = ZipEntries()
            } else {
                current = Current()
            }
            try head.withUnsafeBytes { try route($0, emit: emit) }
            try route(UnsafeRawBufferPointer(rebasing: bytes[take...]), emit: emit)
            return
        }
        try route(bytes, emit: emit)
    }

    /// The end of the file: an error when it stops part way through (what was read stays read).
    public mutating func finish(emit: (ImportedLocation, HistoryFormat) throws -> Void) throws {
        if zip == nil && current == nil {
            current = Current()
            let head = start
            start = []
            try head.withUnsafeBytes { try route($0, emit: emit) }
        }
        if let zip {
            do { try zip.finish() } catch let failure as ZipEntries.Failure {
                throw HistoryReader.Failure(
                    format: nil, reason: "ZIP archive: \(failure.reason)", offset: failure.offset)
            }
        } else {
            try finishCurrent(emit: emit)
        }
    }

    private mutating func route(
        _ bytes: UnsafeRawBufferPointer, emit: (ImportedLocation, HistoryFormat) throws -> Void
    ) throws {
        guard var zip else { return try read(bytes, emit: emit) }
        defer { self.zip = zip }
        do {
            try zip.feed(bytes) { event in
                switch event {
                case let .begin(name):
                    current = Current(name: name)
                    return true
                case let .data(piece):
                    try read(piece, emit: emit)
                    return !current!.ignored
                case .end:
                    try finishCurrent(emit: emit)
                    return true
                }
            }
        } catch let failure as ZipEntries.Failure {
            throw HistoryReader.Failure(format: nil, reason: "ZIP archive: \(failure.reason)", offset: failure.offset)
        }
    }

    /// Reads the next piece of the plain file or the current entry: its first bytes are kept
    /// until its format can be told.
    private mutating func read(
        _ bytes: UnsafeRawBufferPointer, emit: (ImportedLocation, HistoryFormat) throws -> Void
    ) throws {
        guard !current!.ignored, !bytes.isEmpty else { return }
        guard current!.reader == nil else { return try readOn(bytes, emit: emit) }
        var take = 0
        if forcedFormat == nil {
            take = min(HistoryFormat.detectionWindow - current!.start.count, bytes.count)
            current!.start += bytes.prefix(take)
            guard current!.start.count >= HistoryFormat.detectionWindow else { return }
        }
        try open(emit: emit)
        try readOn(UnsafeRawBufferPointer(rebasing: bytes[take...]), emit: emit)
    }

    /// Tells the format from the first bytes kept (or takes the one asked for) and reads them.
    private mutating func open(emit: (ImportedLocation, HistoryFormat) throws -> Void) throws {
        let startBytes = current!.start
        current!.start = []
        let format: HistoryFormat
        if let forcedFormat {
            format = forcedFormat
        } else {
            switch HistoryFormat.detect(startBytes) {
            case let .format(found): format = found
            case let .refused(reason):
                guard isArchive else { throw Refusal(reason: reason) }
                return pass(over: Self.notHistory)
            case .unknown:
                guard isArchive else {
                    throw Refusal(
                        reason: startBytes.isEmpty
                            ? "The file is empty"
                            : "Not a location history this server reads (Google Takeout Records.json or Semantic Location History, an Android or iOS Timeline export, OwnTracks JSON or .rec, GPX, GeoJSON, CSV with a header, or a ZIP archive of them)"
                    )
                }
                return pass(over: Self.notHistory)
            }
        }
        if !isArchive { self.format = format }
        current!.reader = HistoryReader(format: format, columns: columns)
        try startBytes.withUnsafeBytes { try readOn($0, emit: emit) }
    }

    private mutating func pass(over reason: String) {
        current!.ignored = true
        counts[reason, default: 0] += 1
    }

    private mutating func readOn(
        _ bytes: UnsafeRawBufferPointer, emit: (ImportedLocation, HistoryFormat) throws -> Void
    ) throws {
        guard !current!.ignored, !bytes.isEmpty else { return }
        let format = current!.reader!.format
        var count = 0
        defer { current!.locations += count }
        do {
            try current!.reader!.feed(bytes) {
                count += 1
                try emit($0, format)
            }
        } catch let failure as HistoryReader.Failure {
            try fail(failure)
        }
    }

    /// The plain file or the current entry has ended.
    private mutating func finishCurrent(emit: (ImportedLocation, HistoryFormat) throws -> Void) throws {
        guard current != nil else { return }
        if !current!.ignored && current!.reader == nil { try open(emit: emit) }
        if !current!.ignored, let format = current!.reader?.format {
            var count = 0
            do {
                try current!.reader!.finish {
                    count += 1
                    try emit($0, format)
                }
                current!.locations += count
                if let name = current!.name { list(Entry(name: name, format: format, locations: current!.locations)) }
            } catch let failure as HistoryReader.Failure {
                current!.locations += count
                try fail(failure)
            }
        }
        if let reader = current!.reader { counts.merge(reader.skipped, uniquingKeysWith: +) }
        current = nil
    }

    /// A plain file's failure ends the reading; an archive entry's is listed and the next entry read.
    private mutating func fail(_ failure: HistoryReader.Failure) throws {
        guard let name = current!.name else { throw failure }
        var failure = failure
        failure.entry = name
        current!.ignored = true
        counts[Self.unreadable, default: 0] += 1
        list(
            Entry(
                name: name, format: current!.reader!.format, locations: current!.locations, error: failure.description))
    }

    private mutating func list(_ entry: Entry) {
        if entries.count < Self.listedEntries { entries.append(entry) }
    }
}
