import ArgumentParser

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Measure the server over HTTP against a raw SQLite baseline.")
    func run() async throws {
        print("not yet")
    }
}
