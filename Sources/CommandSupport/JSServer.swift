public import ArgumentParser
import CouchJSON
import Foundation
import JavaScript

#if canImport(CDuktape)
import CDuktape
#endif

/// `js-server`: a JavaScript query server process. The database server starts these (as
/// `lt js-server`, or `lt-bench js-server` in the benchmarks) and speaks CouchDB's query server
/// protocol with them on stdin/stdout; not for people.
public struct JSServer: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "js-server", abstract: "Run a JavaScript query server on stdin/stdout (started by lt serve).",
        shouldDisplay: false)

    @Option(name: .customLong("memory-limit"), help: "Address space limit of this process in MiB.")
    var memoryLimit = 1024

    public init() {}

    public func run() throws {
        #if canImport(CDuktape)
        // A function that allocates without end makes this process fail, not the server.
        var limit = rlimit(rlim_cur: rlim_t(memoryLimit) << 20, rlim_max: rlim_t(memoryLimit) << 20)
        setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        guard let context = lt_duk_create() else { throw ExitCode(1) }
        defer { lt_duk_destroy(context) }
        if lt_duk_eval(context, QueryServerScript.source) != 0 {
            FileHandle.standardError.write(
                Data("query server script failed: \(String(cString: lt_duk_string(context)))\n".utf8))
            throw ExitCode(1)
        }
        lt_duk_pop(context)
        while let line = readLine(strippingNewline: true) {
            let status = lt_duk_call_global(context, "__lt_handle", line)
            var answer = String(cString: lt_duk_string(context))
            lt_duk_pop(context)
            if status != 0 { answer = JSON.array(["error", "javascript_error", .string(answer)]).text }
            FileHandle.standardOutput.write(Data((answer + "\n").utf8))
        }
        #else
        FileHandle.standardError.write(
            Data("lt was built without a JavaScript engine: install duktape-dev and rebuild.\n".utf8))
        throw ExitCode(3)
        #endif
    }
}
