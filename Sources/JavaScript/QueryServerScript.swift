/// The query server's JavaScript side, evaluated once in each `lt js-server` process. It speaks
/// CouchDB's query server protocol (one JSON command per line, one JSON answer per line) and
/// offers design-document functions CouchDB's API: `emit`, `log`, `toJSON`, `isArray`, `sum`.
public enum QueryServerScript {
    public static let source = #"""
    var __lt = { funs: [], logs: [], emitted: null };
    function log(message) { __lt.logs.push(typeof message === "string" ? message : JSON.stringify(message)); }
    function toJSON(value) { return JSON.stringify(value); }
    function isArray(value) { return Array.isArray(value); }
    function sum(values) { var total = 0; for (var i = 0; i < values.length; i++) { total += values[i]; } return total; }
    function emit(key, value) {
        if (__lt.emitted === null) { throw { error: "invalid_call", reason: "emit() outside a map function" }; }
        __lt.emitted.push([key === undefined ? null : key, value === undefined ? null : value]);
    }
    function __lt_compile(source) {
        var fn;
        try { fn = eval("(" + source + ")"); } catch (e) {
            throw { error: "compilation_error", reason: String(e) + " (" + source + ")" };
        }
        if (typeof fn !== "function") {
            throw { error: "compilation_error", reason: "Expression does not eval to a function. (" + source + ")" };
        }
        return fn;
    }
    function __lt_error(e) {
        if (e && typeof e === "object" && e.error) { return ["error", String(e.error), String(e.reason || "")]; }
        return ["error", "javascript_error", String(e)];
    }
    function __lt_dispatch(command) {
        switch (command[0]) {
        case "reset":
            __lt.funs = [];
            return true;
        case "add_fun":
            __lt.funs.push(__lt_compile(command[1]));
            return true;
        case "map_doc":
            var doc = command[1], results = [];
            for (var i = 0; i < __lt.funs.length; i++) {
                __lt.emitted = [];
                try {
                    __lt.funs[i](doc);
                    results.push(__lt.emitted);
                } catch (e) {
                    // As CouchDB: the document is skipped for this function, and logged.
                    log("function raised exception " + String(e && e.message ? e.message : JSON.stringify(e)) + " with doc._id " + doc._id);
                    results.push([]);
                }
                __lt.emitted = null;
            }
            return results;
        case "reduce":
            var keys = [], values = [];
            for (var k = 0; k < command[2].length; k++) { keys.push(command[2][k][0]); values.push(command[2][k][1]); }
            return [true, command[1].map(function (source) { return __lt_compile(source)(keys, values, false); })];
        case "rereduce":
            return [true, command[1].map(function (source) { return __lt_compile(source)(null, command[2], true); })];
        default:
            throw { error: "unknown_command", reason: "unknown command '" + command[0] + "'" };
        }
    }
    function __lt_handle(line) {
        __lt.logs = [];
        var result;
        try { result = __lt_dispatch(JSON.parse(line)); } catch (e) { result = __lt_error(e); }
        var out = "";
        for (var i = 0; i < __lt.logs.length; i++) { out += JSON.stringify(["log", __lt.logs[i]]) + "\n"; }
        return out + JSON.stringify(result === undefined ? null : result);
    }
    """#
}
