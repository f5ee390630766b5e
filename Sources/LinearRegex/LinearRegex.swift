/// A regular expression in PCRE's syntax, matched over bytes in time linear in the subject:
/// a Thompson NFA simulated position by position (every state at once), so no pattern and no
/// subject can make a match take exponential time, as a backtracking engine can
/// (`^(x+x+)+y$`). It answers only whether the pattern occurs in the subject, which is all a
/// Mango `$regex` asks.
///
/// Its syntax and meaning are those of CouchDB's `$regex` (Erlang's `re`, PCRE 8, without the
/// `unicode` option): the pattern and the subject are bytes (a UTF-8 `é` is two), classes and
/// caseless matching know ASCII only, `.` is any byte but a newline, `$` also matches before a
/// final newline. Back-references, lookaround, atomic groups, possessive quantifiers,
/// recursion and conditions cannot be matched in linear time and are refused (`RegexError`).
public struct LinearRegex: Sendable {
    /// The largest program a pattern may compile to (counted repetitions are copies:
    /// `(a{100}){100}` is 10,000 steps).
    public static let maxInstructions = 20_000
    /// The longest pattern, in bytes.
    public static let maxPatternBytes = 16_384

    enum Instruction: Sendable {
        /// Consume one byte of the set (`sets[index]`).
        case bytes(Int)
        case split(Int, Int)
        case jump(Int)
        case assertion(Assertion)
        case match
    }

    let program: [Instruction]
    let sets: [ByteSet]
    /// Every match begins at the start of the subject (the program begins with `\A` or `^`).
    let anchoredAtStart: Bool
    /// The bytes a match can begin with, when every match consumes one: positions whose byte
    /// is not among them are passed over while no state is alive. nil: a match may be empty.
    let firstBytes: ByteSet?
    /// How many instructions the pattern compiled to: a match takes at most about twice this
    /// many steps per byte of the subject.
    public var size: Int { program.count }

    public init(_ pattern: String) throws(RegexError) {
        let bytes = Array(pattern.utf8)
        guard bytes.count <= LinearRegex.maxPatternBytes else {
            throw RegexError(kind: .tooLarge, reason: "the pattern is longer than \(LinearRegex.maxPatternBytes) bytes")
        }
        let node = try PatternParser.parse(bytes)
        guard Compiler.size(node) <= LinearRegex.maxInstructions else {
            throw RegexError(
                kind: .tooLarge,
                reason: "the pattern's repetitions make it larger than \(LinearRegex.maxInstructions) steps")
        }
        var compiler = Compiler()
        compiler.emit(node)
        compiler.program.append(.match)
        program = compiler.program
        sets = compiler.sets
        if case .assertion(.start) = program[0] { anchoredAtStart = true } else { anchoredAtStart = false }
        firstBytes = LinearRegex.firstBytes(program, sets)
    }

    /// The union of the byte sets reachable from the start without consuming (every assertion
    /// taken as holding, so it is a superset); nil when the match state is reachable so.
    static func firstBytes(_ program: [Instruction], _ sets: [ByteSet]) -> ByteSet? {
        var seen = Set<Int>(), stack = [0], first = ByteSet()
        while let pc = stack.popLast() {
            guard seen.insert(pc).inserted else { continue }
            switch program[pc] {
            case .match: return nil
            case let .bytes(set): first.formUnion(sets[set])
            case let .jump(to): stack.append(to)
            case let .split(a, b): stack += [a, b]
            case .assertion: stack.append(pc + 1)
            }
        }
        return first
    }

    /// What a match found: the pattern occurs, it does not, or deciding took more than the
    /// budget allowed.
    public enum Outcome: Sendable, Equatable { case match, noMatch, budgetExceeded }

    /// Whether the pattern occurs anywhere in `subject`, deciding within `budget` steps (a step
    /// is one state looked at, at one position: at most the program's size per byte).
    public func firstMatch(in subject: some Collection<UInt8>, budget: Int = .max) -> Outcome {
        let matcher = Matcher(regex: self)
        return Array(subject).withUnsafeBufferPointer { matcher.run($0, budget: budget) }
    }

    /// `firstMatch` for a string's UTF-8 bytes; `budgetExceeded` counts as no match.
    public func matches(_ subject: String, budget: Int = .max) -> Bool {
        var subject = subject
        return subject.withUTF8 { bytes in Matcher(regex: self).run(bytes, budget: budget) == .match }
    }
}

/// Nodes into instructions (Thompson's construction).
struct Compiler {
    var program: [LinearRegex.Instruction] = []
    var sets: [ByteSet] = []
    private var setIndex: [ByteSet: Int] = [:]

    /// How many instructions `node` compiles to (saturating: a size past any limit is enough to refuse it).
    static func size(_ node: Node) -> Int {
        switch node {
        case .empty: return 0
        case .bytes, .assertion: return 1
        case let .sequence(items): return items.reduce(0) { add($0, size($1)) }
        case let .choice(items): return items.reduce(0) { add($0, add(size($1), 2)) }
        case let .repetition(inner, min, max):
            // `min` plain copies, then each optional copy behind a split, or one loop.
            let one = size(inner)
            let optional = max.map { multiply(add(one, 1), $0 - min) } ?? add(one, 2)
            return add(multiply(one, min), optional)
        }
    }

    private static func add(_ a: Int, _ b: Int) -> Int { a.addingReportingOverflow(b).overflow ? .max : a + b }
    private static func multiply(_ a: Int, _ b: Int) -> Int {
        a.multipliedReportingOverflow(by: b).overflow ? .max : a * b
    }

    mutating func emit(_ node: Node) {
        switch node {
        case .empty:
            break
        case let .bytes(set):
            program.append(.bytes(index(of: set)))
        case let .assertion(assertion):
            program.append(.assertion(assertion))
        case let .sequence(items):
            for item in items { emit(item) }
        case let .choice(items):
            // split L1, next; L1: a; jump end; next: split L2, ...; last
            var jumps: [Int] = []
            for (i, item) in items.enumerated() {
                if i < items.count - 1 {
                    let split = program.count
                    program.append(.split(split + 1, 0))
                    emit(item)
                    jumps.append(program.count)
                    program.append(.jump(0))
                    program[split] = .split(split + 1, program.count)
                } else {
                    emit(item)
                }
            }
            for jump in jumps { program[jump] = .jump(program.count) }
        case let .repetition(inner, min, max):
            for _ in 0..<min { emit(inner) }
            if let max {
                // Each optional copy: split into it or out past all of them.
                var splits: [Int] = []
                for _ in min..<max {
                    splits.append(program.count)
                    program.append(.split(program.count + 1, 0))
                    emit(inner)
                }
                for split in splits { program[split] = .split(split + 1, program.count) }
            } else {
                // loop: split body, out; body; jump loop
                let loop = program.count
                program.append(.split(loop + 1, 0))
                emit(inner)
                program.append(.jump(loop))
                program[loop] = .split(loop + 1, program.count)
            }
        }
    }

    private mutating func index(of set: ByteSet) -> Int {
        if let index = setIndex[set] { return index }
        sets.append(set)
        setIndex[set] = sets.count - 1
        return sets.count - 1
    }
}

/// The simulation: the set of states alive at each position, each state at most once.
struct Matcher {
    let regex: LinearRegex

    init(regex: LinearRegex) {
        self.regex = regex
    }

    func run(_ subject: UnsafeBufferPointer<UInt8>, budget: Int) -> LinearRegex.Outcome {
        let n = regex.program.count
        // Two state sets (dense and sparse arrays each) and the closure's stack, in one buffer
        // (on the stack for small programs): a match of a short string allocates nothing.
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: 6 * n + 4) { buffer in
            buffer.initialize(repeating: 0)
            let base = buffer.baseAddress!
            var current = StateSet(dense: base, sparse: base + n)
            var next = StateSet(dense: base + 2 * n, sparse: base + 3 * n)
            return simulate(subject, budget: budget, &current, &next, stack: base + 4 * n)
        }
    }

    private func simulate(
        _ subject: UnsafeBufferPointer<UInt8>, budget: Int, _ current: inout StateSet, _ next: inout StateSet,
        stack: UnsafeMutablePointer<Int32>
    ) -> LinearRegex.Outcome {
        let program = regex.program
        let sets = regex.sets
        let count = subject.count
        var steps = 0
        var i = 0
        while true {
            if current.isEmpty {
                // Nothing alive: an anchored pattern is done; otherwise no match can begin
                // before a byte that can start one.
                if i > 0, regex.anchoredAtStart { return .noMatch }
                if let first = regex.firstBytes {
                    let from = i
                    while i < count, !first.contains(subject[i]) { i += 1 }
                    steps += i - from
                    if i == count { return steps > budget ? .budgetExceeded : .noMatch }
                }
            }
            // A match may start at every position.
            if Matcher.add(0, at: i, subject, program, into: &current, stack: stack, steps: &steps) { return .match }
            if steps > budget { return .budgetExceeded }
            if i == count { break }
            let byte = subject[i]
            next.clear()
            for k in 0..<current.count {
                let pc = Int(current.dense[k])
                steps += 1
                if case let .bytes(set) = program[pc], sets[set].contains(byte),
                    Matcher.add(pc + 1, at: i + 1, subject, program, into: &next, stack: stack, steps: &steps)
                {
                    return .match
                }
            }
            swap(&current, &next)
            if steps > budget { return .budgetExceeded }
            i += 1
        }
        return .noMatch
    }

    /// Adds `pc` and every state reachable from it without consuming a byte at position `i`
    /// (assertions decided there). True when the match state is reached.
    private static func add(
        _ pc: Int, at i: Int, _ subject: UnsafeBufferPointer<UInt8>, _ program: [LinearRegex.Instruction],
        into set: inout StateSet,
        stack: UnsafeMutablePointer<Int32>, steps: inout Int
    ) -> Bool {
        // Each state enters the set once and pushes at most two: the stack holds at most 2n + 1.
        var top = 0
        stack[0] = Int32(pc)
        top = 1
        while top > 0 {
            top -= 1
            let pc = Int(stack[top])
            guard set.insert(pc) else { continue }
            steps += 1
            switch program[pc] {
            case .match: return true
            case .bytes: break
            case let .jump(to):
                stack[top] = Int32(to)
                top += 1
            case let .split(a, b):
                stack[top] = Int32(b)
                stack[top + 1] = Int32(a)
                top += 2
            case let .assertion(assertion):
                if Matcher.holds(assertion, at: i, subject) {
                    stack[top] = Int32(pc + 1)
                    top += 1
                }
            }
        }
        return false
    }

    static func holds(_ assertion: Assertion, at i: Int, _ subject: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = subject.count
        switch assertion {
        case .start: return i == 0
        case .lineStart: return i == 0 || (subject[i - 1] == 10 && i < count)
        case .end: return i == count
        case .endOrFinalNewline: return i == count || (i == count - 1 && subject[i] == 10)
        case .lineEnd: return i == count || subject[i] == 10
        case .wordBoundary, .notWordBoundary:
            let before = i > 0 && ByteSet.word.contains(subject[i - 1])
            let after = i < count && ByteSet.word.contains(subject[i])
            return (before != after) == (assertion == .wordBoundary)
        }
    }
}

/// A set of program counters with constant-time insert, membership and clear, over memory the
/// matcher provides (`dense[0..<count]` are the members; `sparse[pc]` is where `pc` is).
struct StateSet {
    let dense: UnsafeMutablePointer<Int32>
    let sparse: UnsafeMutablePointer<Int32>
    private(set) var count = 0
    var isEmpty: Bool { count == 0 }

    init(dense: UnsafeMutablePointer<Int32>, sparse: UnsafeMutablePointer<Int32>) {
        self.dense = dense
        self.sparse = sparse
    }

    /// Inserts `pc`; false when it was there. (`sparse` keeps stale slots: one is trusted only
    /// when `dense` agrees.)
    mutating func insert(_ pc: Int) -> Bool {
        let slot = Int(sparse[pc])
        if slot < count, dense[slot] == Int32(pc) { return false }
        sparse[pc] = Int32(count)
        dense[count] = Int32(pc)
        count += 1
        return true
    }

    mutating func clear() { count = 0 }
}
