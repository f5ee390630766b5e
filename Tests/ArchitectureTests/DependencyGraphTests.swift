import Foundation
import Testing

/// The package's targets depend on each other only as `docs/ARCHITECTURE.md` draws it: every
/// edge in `Package.swift` is in the documented graph, and the documented graph runs one way
/// (no edge to a higher layer, no cycle).
struct DependencyGraphTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func everyEdgeInPackageSwiftIsDocumented() throws {
        let package = try PackageManifest.read(Self.root.appendingPathComponent("Package.swift"))
        let documented = try DocumentedGraph.read(Self.root.appendingPathComponent("docs/ARCHITECTURE.md"))
        for target in package.targets.keys.sorted() where !package.isTest(target) {
            #expect(documented.layers[target] != nil, "\(target) is in Package.swift but not in the table of docs/ARCHITECTURE.md")
        }
        for target in documented.layers.keys.sorted() {
            #expect(package.targets[target] != nil, "\(target) is in docs/ARCHITECTURE.md but not in Package.swift")
        }
        for (target, dependencies) in package.targets.sorted(by: { $0.key < $1.key }) where !package.isTest(target) {
            for dependency in dependencies.sorted() {
                #expect(documented.edges[target, default: []].contains(dependency),
                        "Package.swift: \(target) depends on \(dependency), which docs/ARCHITECTURE.md does not allow")
            }
        }
    }

    @Test func documentedGraphRunsOneWay() throws {
        let documented = try DocumentedGraph.read(Self.root.appendingPathComponent("docs/ARCHITECTURE.md"))
        #expect(documented.layers.count >= 15)
        for (target, dependencies) in documented.edges {
            for dependency in dependencies {
                let from = try #require(documented.layers[target]), to = try #require(documented.layers[dependency], "\(dependency) has no layer")
                #expect(to <= from, "\(target) (layer \(from)) may depend on \(dependency) (layer \(to)): an upward edge")
            }
        }
        #expect(documented.cycle() == nil, "a cycle: \(documented.cycle() ?? [])")
    }

    /// What the sources import is what Package.swift declares: every module a source target's
    /// files import (besides the platform's) is one of its declared dependencies, and every
    /// declared dependency is imported by one of its files (a target of C sources, linked for its
    /// symbols, is not read). A module imported but not declared builds only while some other
    /// dependency happens to bring it; one declared and not imported is an edge that is not there.
    @Test func importsMatchDeclaredDependencies() throws {
        let package = try PackageManifest.read(Self.root.appendingPathComponent("Package.swift"))
        for target in package.targets.keys.sorted() where !package.isTest(target) {
            let imports = try SourceImports.read(Self.root.appendingPathComponent("Sources/\(target)"))
            guard !imports.files.isEmpty else { continue }
            let declared = package.targets[target, default: []].union(package.products[target, default: []])
            for module in imports.modules.keys.sorted() where !SourceImports.platform.contains(module) && !declared.contains(module) {
                let files = imports.modules[module, default: []].sorted()
                Issue.record("\(target): \(files.joined(separator: ", ")) \(files.count == 1 ? "imports" : "import") \(module), which Package.swift does not declare for it")
            }
            for dependency in declared.sorted() where imports.modules[dependency] == nil {
                Issue.record("Package.swift: \(target) depends on \(dependency), which none of its files imports")
            }
        }
    }

    /// The compiler settings of the model codebases (Hummingbird's) on every target of Swift
    /// sources: `strict` turns on `ExistentialAny`, `MemberImportVisibility` (a member is used
    /// only where its module is imported) and `InternalImportsByDefault` (an import is internal
    /// unless written `public import`, so a module's public API says which modules it exposes).
    @Test func everySwiftTargetHasTheStrictSettings() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let strict = try #require(text.firstRange(of: "let strict: [SwiftSetting] = [").map { PackageManifest.balanced(text[$0.upperBound...], open: "[", close: "]") })
        for feature in ["ExistentialAny", "MemberImportVisibility", "InternalImportsByDefault"] {
            #expect(strict.contains(".enableUpcomingFeature(\"\(feature)\")"), "strict lacks \(feature)")
        }
        let declaration = /\.(target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"/
        var checked = 0
        for match in text.matches(of: declaration) {
            let name = String(match.output.2)
            let body = PackageManifest.balanced(text[match.range.upperBound...])
            let path = body.firstMatch(of: /path:\s*"([^"]+)"/).map { String($0.output.1) }
                ?? (match.output.1 == "testTarget" ? "Tests/\(name)" : "Sources/\(name)")
            let sources = FileManager.default.enumerator(atPath: Self.root.appendingPathComponent(path).path)?
                .contains { ($0 as? String)?.hasSuffix(".swift") == true } ?? false
            guard sources else { continue }
            checked += 1
            #expect(body.contains("swiftSettings: strict"), "\(name) is built without the strict settings")
        }
        #expect(checked >= 40)
    }

    /// The import reader itself, on lines written for it.
    @Test func importReaderFindsEveryForm() {
        let modules = SourceImports.modules(in: """
            import Foundation
            @preconcurrency import NIOCore
            public import GRDB
            package import struct Geo.Coordinate
            #if canImport(Glibc)
            import Glibc
            #endif
            // import Commented
            let text = "import Quoted"
              @_implementationOnly import CSQLite
            """)
        #expect(modules == ["Foundation", "NIOCore", "GRDB", "Geo", "Glibc", "CSQLite"])
    }

    /// Test targets depend on the source targets they test (and the test support), never on
    /// another test target.
    @Test func testTargetsDependOnlyOnSourceTargets() throws {
        let package = try PackageManifest.read(Self.root.appendingPathComponent("Package.swift"))
        let tests = package.targets.keys.filter(package.isTest)
        #expect(!tests.isEmpty)
        for test in tests.sorted() {
            for dependency in package.targets[test, default: []] {
                #expect(!package.isTest(dependency), "\(test) depends on the test target \(dependency)")
            }
        }
    }

    /// The reader itself, on a manifest written for it.
    @Test func manifestReaderFindsTargetsAndEdges() {
        let manifest = PackageManifest(text: """
            let package = Package(targets: [
                .target(name: "A", dependencies: ["B", .product(name: "X", package: "x")], swiftSettings: strict),
                .target(name: "B", resources: [.copy("Dashboard")]),
                .executableTarget(name: "c-tool", dependencies: ["A"]),
                .testTarget(name: "ATests", dependencies: ["A", "B"]),
            ])
            package.targets.first { $0.name == "B" }?.dependencies.append("CSystem")
            package.targets.first { $0.name == "c-tool" }?.dependencies += ["CAlloc", "CAllocSettings"]
            """)
        #expect(manifest.targets == ["A": ["B"], "B": ["CSystem"], "c-tool": ["A", "CAlloc", "CAllocSettings"], "ATests": ["A", "B"]])
        #expect(manifest.products["A"] == ["X"] && manifest.products["B"] == [])
        #expect(manifest.isTest("ATests") && !manifest.isTest("A"))
    }

    @Test func cycleIsFound() {
        let graph = DocumentedGraph(layers: ["A": 1, "B": 1, "C": 0], edges: ["A": ["B"], "B": ["A", "C"]])
        #expect(graph.cycle() != nil)
        #expect(DocumentedGraph(layers: ["A": 1, "B": 0], edges: ["A": ["B"]]).cycle() == nil)
    }
}

/// The targets of `Package.swift` and their in-package dependencies, read from its text (the
/// manifest is plain: `.target(name: "X", dependencies: ["Y", .product(...)])`, and
/// dependencies appended after it with `package.targets.first { $0.name == "X" }?.dependencies.append("Y")`).
struct PackageManifest {
    var targets: [String: Set<String>] = [:]
    /// Each target's product dependencies (`.product(name: "X", package: …)`), by module name.
    var products: [String: Set<String>] = [:]
    var testTargets: Set<String> = []

    func isTest(_ name: String) -> Bool { testTargets.contains(name) }

    static func read(_ url: URL) throws -> PackageManifest {
        PackageManifest(text: try String(contentsOf: url, encoding: .utf8))
    }

    init(text: String) {
        let declaration = /\.(target|executableTarget|testTarget|systemLibrary)\(\s*name:\s*"([^"]+)"/
        for match in text.matches(of: declaration) {
            let name = String(match.output.2)
            if match.output.1 == "testTarget" { testTargets.insert(name) }
            let body = Self.balanced(text[match.range.upperBound...])
            var dependencies = Set<String>()
            var products = Set<String>()
            if let list = body.firstRange(of: "dependencies:") {
                let items = Self.balanced(body[list.upperBound...].drop { $0 != "[" }.dropFirst(), open: "[", close: "]")
                for product in items.matches(of: /\.product\(\s*name:\s*"([^"]+)"/) { products.insert(String(product.output.1)) }
                let withoutProducts = items.replacing(/\.product\([^)]*\)/, with: "")
                for literal in withoutProducts.matches(of: /"([^"]+)"/) { dependencies.insert(String(literal.output.1)) }
            }
            targets[name] = dependencies
            self.products[name] = products
        }
        // Dependencies added after the declaration: `.dependencies.append("Y")` or `+= ["Y", "Z"]`.
        let appended = /package\.targets\.first \{ \$0\.name == "([^"]+)" \}\?\.dependencies(?:\.append\(("[^"]+")\)| \+= \[([^\]]*)\])/
        for match in text.matches(of: appended) {
            let list = match.output.2 ?? match.output.3 ?? ""
            for literal in list.matches(of: /"([^"]+)"/) { targets[String(match.output.1), default: []].insert(String(literal.output.1)) }
        }
    }

    /// The text up to the bracket that closes the one just before it.
    static func balanced(_ text: Substring, open: Character = "(", close: Character = ")") -> Substring {
        var depth = 1
        var inString = false
        for index in text.indices {
            let character = text[index]
            if character == "\"" { inString.toggle() }
            if inString { continue }
            if character == open { depth += 1 }
            if character == close {
                depth -= 1
                if depth == 0 { return text[..<index] }
            }
        }
        return text
    }
}

/// The table "Targets and layers" in `docs/ARCHITECTURE.md`: `| layer | target | purpose | may depend on |`.
struct DocumentedGraph {
    var layers: [String: Int]
    var edges: [String: Set<String>]

    static func read(_ url: URL) throws -> DocumentedGraph {
        let text = try String(contentsOf: url, encoding: .utf8)
        var layers: [String: Int] = [:], edges: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            // | 4 protocol | `CouchProtocol` | purpose | `CouchJSON`, `Geo` |
            guard cells.count == 6, let layer = Int(cells[1].prefix { $0.isNumber }),
                  let target = cells[2].firstMatch(of: /^`([^`]+)`$/)?.output.1 else { continue }
            layers[String(target)] = layer
            edges[String(target)] = Set(cells[4].matches(of: /`([^`]+)`/).map { String($0.output.1) })
        }
        return DocumentedGraph(layers: layers, edges: edges)
    }

    /// A cycle of targets, or nil.
    func cycle() -> [String]? {
        var state: [String: Bool] = [:]  // false: on the path; true: done
        func visit(_ node: String, _ path: [String]) -> [String]? {
            if state[node] == true { return nil }
            if state[node] == false, let start = path.firstIndex(of: node) { return Array(path[start...]) + [node] }
            state[node] = false
            for next in edges[node, default: []].sorted() {
                if let found = visit(next, path + [node]) { return found }
            }
            state[node] = true
            return nil
        }
        for node in edges.keys.sorted() {
            if let found = visit(node, []) { return found }
        }
        return nil
    }
}

/// The modules a target's Swift files import, and which files import each.
struct SourceImports {
    var files: [URL] = []
    var modules: [String: Set<String>] = [:]

    /// Modules of the platform and the toolchain, not declared in Package.swift.
    static let platform: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "FoundationXML", "Dispatch", "Glibc", "Musl",
        "Darwin", "WinSDK", "Android", "CoreLocation", "Security", "os", "Synchronization", "Observation", "RegexBuilder",
        "_Concurrency", "XCTest", "Testing",
    ]

    static func read(_ directory: URL) throws -> SourceImports {
        var result = SourceImports()
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return result }
        for case let file as URL in walker where file.pathExtension == "swift" {
            result.files.append(file)
            for module in modules(in: try String(contentsOf: file, encoding: .utf8)) {
                result.modules[module, default: []].insert(file.lastPathComponent)
            }
        }
        return result
    }

    /// The modules imported by `text`, in order: `import M`, with attributes (`@preconcurrency`),
    /// an access level (`public import`) or a declaration kind (`import struct M.T`).
    static func modules(in text: String) -> [String] {
        let line = /^\s*(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)/
        return text.split(separator: "\n").compactMap { $0.firstMatch(of: line).map { String($0.output.1) } }
    }
}
