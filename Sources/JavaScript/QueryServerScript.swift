/// The query server's JavaScript side, evaluated once in each `lt js-server` process. It speaks
/// CouchDB's query server protocol (one JSON command per line, one JSON answer per line) and
/// offers design-document functions CouchDB's API: `emit`, `log`, `toJSON`, `isArray`, `sum`,
/// `require` (CommonJS modules stored in the design document), `st_index` (geo index
/// functions), and for shows and lists `start`, `send`, `getRow`.
///
/// Commands:
/// - `["reset"]`, `["add_lib", lib]`, `["add_fun", source]`, `["map_doc", doc]`: map functions,
///   as in CouchDB. `require` in map functions resolves against `{"views": {"lib": lib}}`.
/// - `["map_docs", [doc, ...]]`: a batch of `map_doc` in one round trip; each function's rows
///   are `null` for a document it threw on.
/// - `["reduce", [source], [[[key, id], value], ...]]`, `["rereduce", [source], [value, ...]]`.
/// - `["ddoc", "new", key, ddoc]` caches a design document under `key`; its functions compile
///   on first use and stay compiled until the key is dropped (`["ddoc", "drop", key]`).
/// - `["ddoc", key, path, args]` calls the function at `path` in that design document:
///   `validate_doc_update` → `1` or `{"forbidden"|"unauthorized": reason}` (and
///   `["validate_doc_update", "batch"]` with `[[newDoc, oldDoc], ...], userCtx, secObj` → one
///   such verdict, or `["error", ...]`, per write); `filters` and
///   `views` (a view's map as a filter) → `[true, [bool, ...]]` for a batch of documents;
///   `shows` → `["resp", response]`; `updates` → `["up", doc, response]`; `lists` (given every
///   row at once) → `["list", startResponse, [chunk, ...]]`.
public enum QueryServerScript {
    public static let source = #"""
    var __lt = { funs: [], lib: null, logs: [], emitted: null, ddocs: {}, list: null, reducers: {}, reducerCount: 0 };
    function log(message) { __lt.logs.push(typeof message === "string" ? message : JSON.stringify(message)); }
    function toJSON(value) { return JSON.stringify(value); }
    function isArray(value) { return Array.isArray(value); }
    function sum(values) { var total = 0; for (var i = 0; i < values.length; i++) { total += values[i]; } return total; }
    function emit(key, value) {
        if (__lt.emitted === null) { throw { error: "invalid_call", reason: "emit() outside a map function" }; }
        __lt.emitted.push([key === undefined ? null : key, value === undefined ? null : value]);
    }
    // A geo index function names a document's geometry; the geo index stores it as the key.
    function st_index(geometry) { emit(geometry, null); }
    function start(response) { __lt_listOnly("start").started = response || {}; }
    function send(chunk) { __lt_listOnly("send").chunks.push(String(chunk)); }
    function getRow() { var list = __lt_listOnly("getRow"); return list.index < list.rows.length ? list.rows[list.index++] : null; }
    function __lt_listOnly(name) {
        if (__lt.list === null) { throw { error: "invalid_call", reason: name + "() outside a list function" }; }
        return __lt.list;
    }

    // CommonJS modules: `require("lib/geo")` evaluates the string at that path of `root`
    // once (per design document revision) and returns its exports.
    function __lt_requirer(root, cache) {
        function resolve(names, mod) {
            for (var i = 0; i < names.length; i++) {
                var n = names[i];
                if (n === "..") {
                    if (!(mod.parent && mod.parent.parent)) { throw { error: "invalid_require_path", reason: "Object has no parent " + JSON.stringify(mod.current) }; }
                    mod = { id: mod.id.slice(0, mod.id.lastIndexOf("/")), parent: mod.parent.parent, current: mod.parent.current };
                } else if (n === ".") {
                    if (!mod.parent) { throw { error: "invalid_require_path", reason: "Object has no parent " + JSON.stringify(mod.current) }; }
                    mod = { id: mod.id, parent: mod.parent, current: mod.current };
                } else {
                    if (i === 0) { mod = { id: "", parent: null, current: root }; }
                    if (mod.current === null || typeof mod.current !== "object" || mod.current[n] === undefined) {
                        throw { error: "invalid_require_path", reason: "Object has no property \"" + n + "\"" };
                    }
                    mod = { id: mod.id ? mod.id + "/" + n : n, parent: mod, current: mod.current[n] };
                }
            }
            if (typeof mod.current !== "string") {
                throw { error: "invalid_require_path", reason: "Must require a JavaScript string, not: " + typeof mod.current };
            }
            return { id: mod.id, parent: mod.parent, current: mod.current, exports: {} };
        }
        function requireFrom(parent) {
            return function (name) {
                var module = resolve(name.split("/"), parent || { id: "", parent: null, current: root });
                if (!cache.hasOwnProperty(module.id)) {
                    cache[module.id] = module.exports;  // a circular require sees the partial exports
                    var body;
                    try { body = eval("(function (module, exports, require) { " + module.current + "\n})"); } catch (e) {
                        throw { error: "compilation_error", reason: "Module require('" + name + "') raised error " + String(e) };
                    }
                    body(module, module.exports, requireFrom(module));
                    cache[module.id] = module.exports;
                }
                return cache[module.id];
            };
        }
        return requireFrom(null);
    }
    function __lt_compile(source, require) {
        var fn;
        // As CouchDB's rewrite of function sources: a trailing semicolon (`function (doc) {...};`,
        // common in design documents) does not stop the function being the source's value.
        var text = String(source), end = text.length;
        while (end > 0 && (text.charAt(end - 1) === ";" || /\s/.test(text.charAt(end - 1)))) end--;
        text = text.substring(0, end);
        // The newline ends a `// comment` on the source's last line before the parenthesis.
        try { fn = eval("(" + text + "\n)"); } catch (e) {
            throw { error: "compilation_error", reason: String(e) + " (" + source + ")" };
        }
        if (typeof fn !== "function") {
            throw { error: "compilation_error", reason: "Expression does not eval to a function. (" + source + ")" };
        }
        return fn;
    }
    // Reduce functions compile once per source text (a bounded cache).
    function __lt_reducer(source) {
        var fn = __lt.reducers[source];
        if (!fn) {
            if (__lt.reducerCount >= 256) { __lt.reducers = {}; __lt.reducerCount = 0; }
            fn = __lt.reducers[source] = __lt_compile(source, null);
            __lt.reducerCount++;
        }
        return fn;
    }
    function __lt_error(e) {
        if (e && typeof e === "object" && !Array.isArray(e) && e.error) { return ["error", String(e.error), String(e.reason || "")]; }
        if (Array.isArray(e) && e[0] === "error") { return ["error", String(e[1]), String(e[2])]; }
        return ["error", "javascript_error", String(e && e.stack ? e.stack : e)];
    }
    function __lt_describe(e) { return e && e.message ? String(e.message) : JSON.stringify(e); }
    // Runs a map function on one document: its emitted rows, or null when it threw.
    function __lt_map(fn, doc) {
        __lt.emitted = [];
        try {
            fn(doc);
            return __lt.emitted;
        } catch (e) {
            // As CouchDB: the document is skipped for this function, and logged.
            log("function raised exception " + __lt_describe(e) + " with doc._id " + doc._id);
            return null;
        } finally {
            __lt.emitted = null;
        }
    }
    function __lt_ddoc(key, path, args) {
        var entry = __lt.ddocs[key];
        if (!entry) { throw { error: "query_protocol_error", reason: "uncached design doc: " + key }; }
        // `["validate_doc_update", "batch"]` is the same function over many writes.
        var batch = path[0] === "validate_doc_update" && path[1] === "batch";
        var functionPath = batch ? ["validate_doc_update"] : path;
        var name = functionPath.join("/");
        var fn = entry.funs[name];
        if (!fn) {
            var source = entry.doc;
            for (var i = 0; i < functionPath.length; i++) { source = source === null || typeof source !== "object" ? undefined : source[functionPath[i]]; }
            if (typeof source !== "string") { throw { error: "not_found", reason: "missing function " + name + " in " + entry.doc._id }; }
            fn = entry.funs[name] = __lt_compile(source, entry.require);
        }
        switch (path[0]) {
        case "validate_doc_update":
            if (!batch) { return __lt_validate(entry, fn, args[0], args[1], args[2], args[3]); }
            // args: [[newDoc, oldDoc], ...], userCtx, secObj; an exception is that write's verdict.
            return args[0].map(function (write) {
                try { return __lt_validate(entry, fn, write[0], write[1], args[1], args[2]); } catch (e) { return __lt_error(e); }
            });
        case "filters":
            return [true, args[0].map(function (doc) {
                try { return !!fn(doc, args[1]); } catch (e) {
                    log("filter " + name + " raised exception " + __lt_describe(e) + " with doc._id " + (doc && doc._id));
                    return false;
                }
            })];
        case "views":
            return [true, args[0].map(function (doc) { var rows = __lt_map(fn, doc); return rows !== null && rows.length > 0; })];
        case "shows":
            return ["resp", __lt_response(fn(args[0], args[1]))];
        case "updates":
            var result = fn(args[0], args[1]);
            if (!Array.isArray(result)) { throw { error: "render_error", reason: "undefined response from update function" }; }
            return ["up", result[0] === undefined ? null : result[0], __lt_response(result[1])];
        case "lists":
            __lt.list = { rows: args[2], index: 0, chunks: [], started: null };
            try {
                var tail = fn(args[0], args[1]);
                if (tail !== undefined && tail !== null) { __lt.list.chunks.push(String(tail)); }
                return ["list", __lt.list.started || {}, __lt.list.chunks];
            } finally {
                __lt.list = null;
            }
        default:
            throw { error: "unknown_command", reason: "unknown ddoc function type '" + path[0] + "'" };
        }
    }
    function __lt_validate(entry, fn, newDoc, oldDoc, userCtx, secObj) {
        try {
            fn(newDoc, oldDoc, userCtx, secObj);
            return 1;
        } catch (e) {
            if (e && e.forbidden !== undefined) { return { forbidden: e.forbidden }; }
            if (e && e.unauthorized !== undefined) { return { unauthorized: e.unauthorized }; }
            throw { error: "validation_error", reason: "validate_doc_update in " + entry.doc._id + " raised " + __lt_describe(e) };
        }
    }
    // A show or update result as a response object: strings become the body.
    function __lt_response(value) {
        if (value === undefined || value === null) { return { body: "" }; }
        if (typeof value === "string") { return { body: value }; }
        return value;
    }
    function __lt_dispatch(command) {
        switch (command[0]) {
        case "reset":
            __lt.funs = [];
            __lt.lib = null;
            return true;
        case "add_lib":
            __lt.lib = command[1];
            return true;
        case "add_fun":
            __lt.funs.push(__lt_compile(command[1], __lt_requirer({ views: { lib: __lt.lib } }, {})));
            return true;
        case "map_doc":
            var doc = command[1];
            return __lt.funs.map(function (fn) { return __lt_map(fn, doc) || []; });
        case "map_docs":
            // Our batch form of map_doc: for each document, each function's rows (null: it threw).
            return command[1].map(function (doc) { return __lt.funs.map(function (fn) { return __lt_map(fn, doc); }); });
        case "reduce":
            var keys = [], values = [];
            for (var k = 0; k < command[2].length; k++) { keys.push(command[2][k][0]); values.push(command[2][k][1]); }
            return [true, command[1].map(function (source) { return __lt_reducer(source)(keys, values, false); })];
        case "rereduce":
            return [true, command[1].map(function (source) { return __lt_reducer(source)(null, command[2], true); })];
        case "ddoc":
            if (command[1] === "new") {
                var cache = {};
                __lt.ddocs[command[2]] = { doc: command[3], funs: {}, require: __lt_requirer(command[3], cache) };
                return true;
            }
            if (command[1] === "drop") {
                delete __lt.ddocs[command[2]];
                return true;
            }
            return __lt_ddoc(command[1], command[2], command[3]);
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
