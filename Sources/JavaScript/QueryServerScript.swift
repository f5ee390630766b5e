// swift-format-ignore-file
// (the JavaScript below is the query server's source, laid out as JavaScript)
/// The query server's JavaScript side, evaluated once in each `lt js-server` process. It speaks
/// CouchDB's query server protocol (one JSON command per line, one JSON answer per line) and
/// offers design-document functions CouchDB's API: `emit`, `log`, `toJSON`, `isArray`, `sum`,
/// `require` (CommonJS modules stored in the design document), `st_index` (geo index
/// functions), and for shows and lists `start`, `send`, `getRow`, `provides`, `registerType`.
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
///   row at once) → `["list", startResponse, [chunk, ...]]`; `rewrites` (a JavaScript rewrite
///   function, given the request) → `["ok", rewrite]` or `["no_dispatch_rule"]`. Shows, lists,
///   updates and rewrites behave as CouchDB's `render.js` defines them (response wrapping,
///   `provides` negotiation, when a list's headers take effect, which errors pass through).
public enum QueryServerScript {
    public static let source = #"""
    // Everything below is private to this closure: design functions are compiled in the global
    // scope (`__lt_globalEval`), so one database's functions cannot reach the state of this
    // server (its cached design documents, compiled functions, rows being emitted), which
    // serves every database. What they share is frozen (the built-ins, and the API below as
    // read-only globals); globals a function leaves behind are removed after each command; and
    // code cannot be made at run time (`eval`, `Function`), as in CouchDB's sandbox.
    (function (global) {
    "use strict";
    var __lt_globalEval = eval;
    var __lt_functionPrototype = Object.getPrototypeOf(function () {});
    var __lt = { funs: [], lib: null, logs: [], emitted: null, ddocs: {}, reducers: {}, reducerCount: 0, reduceLimit: "true", lineLength: 0 };
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
    // Content negotiation, as CouchDB's shows and lists offer it: `registerType(key, mime, ...)`
    // names media types, `provides(key, fn)` offers a rendering, and the request's `?format=`
    // or its Accept header (matched as CouchDB's mimeparse does) chooses one.
    var __lt_mime = { byKey: null, keyOf: null, provided: [], contentType: null };
    var __lt_defaultTypes = [
        ["all", "*/*"], ["text", "text/plain; charset=utf-8", "txt"], ["html", "text/html; charset=utf-8"],
        ["xhtml", "application/xhtml+xml", "xhtml"], ["xml", "application/xml", "text/xml", "application/x-xml"],
        ["js", "text/javascript", "application/javascript", "application/x-javascript"], ["css", "text/css"],
        ["ics", "text/calendar"], ["csv", "text/csv"], ["rss", "application/rss+xml"], ["atom", "application/atom+xml"],
        ["yaml", "application/x-yaml", "text/yaml"], ["multipart_form", "multipart/form-data"],
        ["url_encoded_form", "application/x-www-form-urlencoded"], ["json", "application/json", "text/x-json"]
    ];
    function __lt_resetMime() {
        __lt_mime = { byKey: {}, keyOf: {}, provided: [], contentType: null };
        for (var i = 0; i < __lt_defaultTypes.length; i++) { registerType.apply(null, __lt_defaultTypes[i]); }
    }
    function registerType(key) {
        var mimes = Array.prototype.slice.call(arguments, 1);
        __lt_mime.byKey[key] = mimes;
        for (var i = 0; i < mimes.length; i++) { __lt_mime.keyOf[mimes[i]] = key; }
    }
    function provides(key, fn) { __lt_mime.provided.push([key, fn]); }
    function __lt_trim(text) { return text.replace(/^\s+/, "").replace(/\s+$/, ""); }
    // "type/subtype; a=b; q=0.5" as {type, subtype, params}; a missing or invalid q is 1.
    function __lt_mediaRange(text) {
        var parts = text.split(";"), params = {};
        for (var i = 0; i < parts.length; i++) {
            var pair = parts[i].split("=");
            if (pair.length == 2) { params[__lt_trim(pair[0])] = __lt_trim(pair[1]); }
        }
        var q = parseFloat(params.q);
        if (!params.q || isNaN(q) || q > 1 || q < 0) { params.q = "1"; }
        var full = __lt_trim(parts[0]);
        if (full == "*") { full = "*/*"; }
        var names = full.split("/");
        return { type: names[0], subtype: names[1], params: params };
    }
    // How well `mime` fits the Accept ranges: [fitness, q] of the best fitting range.
    function __lt_fitness(mime, ranges) {
        var target = __lt_mediaRange(mime), best = -1, bestQ = 0;
        for (var i = 0; i < ranges.length; i++) {
            var range = ranges[i];
            if ((range.type == target.type || range.type == "*" || target.type == "*") &&
                (range.subtype == target.subtype || range.subtype == "*" || target.subtype == "*")) {
                var fitness = (range.type == target.type ? 100 : 0) + (range.subtype == target.subtype ? 10 : 0);
                for (var name in target.params) {
                    if (name != "q" && range.params[name] && range.params[name] == target.params[name]) { fitness++; }
                }
                if (fitness > best) { best = fitness; bestQ = range.params.q; }
            }
        }
        return [best, parseFloat(bestQ)];
    }
    // The supported type the Accept header prefers, or "". The ordering is CouchDB's: its
    // mimeparse sorts [[fitness, q], index, type] with JavaScript's default (string) order.
    function __lt_bestMatch(supported, accept) {
        var ranges = accept.split(",").map(__lt_mediaRange), weighted = [];
        for (var i = 0; i < supported.length; i++) { weighted.push([__lt_fitness(supported[i], ranges), i, supported[i]]); }
        weighted.sort();
        var last = weighted[weighted.length - 1];
        return last && last[0][1] ? last[2] : "";
    }
    // Runs the rendering `provides` offered for the request, or throws not_acceptable.
    function __lt_runProvides(req, ddoc) {
        var mime = __lt_mime, key = null, accept = req.headers ? req.headers["Accept"] : undefined, fn = null, i;
        var provided = mime.provided;
        if (req.query && req.query.format) {
            key = req.query.format;
            mime.contentType = mime.byKey[key] ? mime.byKey[key][0] : null;
        } else if (accept) {
            // CouchDB reverses the offers before matching (the last offer of a key wins).
            provided = provided.slice().reverse();
            var supported = [];
            for (i = 0; i < provided.length; i++) {
                if (mime.byKey[provided[i][0]]) { supported = supported.concat(mime.byKey[provided[i][0]]); }
            }
            mime.contentType = __lt_bestMatch(supported, accept);
            key = mime.keyOf[mime.contentType];
        } else {
            key = provided[0][0];
            mime.contentType = mime.byKey[key] ? mime.byKey[key][0] : null;
        }
        for (i = 0; i < provided.length; i++) {
            if (provided[i][0] == key) { fn = provided[i][1]; break; }
        }
        if (!fn) {
            var types = mime.provided.map(function (offer) { return (mime.byKey[offer[0]] || []).join(", ") || offer[0]; });
            throw ["error", "not_acceptable", "Content-Type " + (accept || key) + " not supported, try one of: " + types.join(", ")];
        }
        return fn.call(ddoc);
    }
    function __lt_withContentType(response) {
        response.headers = response.headers || {};
        if (__lt_mime.contentType) { response.headers["Content-Type"] = response.headers["Content-Type"] || __lt_mime.contentType; }
        return response;
    }

    // Rendering state of one show or list call: `start(response)` and `send(chunk)` in both
    // (a show's `start` names headers), `getRow()` in lists. A list is given all its rows at
    // once; what CouchDB would have sent when (the response starts with the first chunk that
    // is not empty, with the headers of the last `start` seen by then) is kept as it would be.
    var __lt_render = null;
    function __lt_resetRender(rows) {
        __lt_render = { chunks: [], start: {}, newHeader: false, rows: rows, index: 0, gotRow: false, lastRow: false,
                        headers: null, committed: null, body: [] };
    }
    function __lt_rendering(name) {
        if (__lt_render === null) { throw { error: "invalid_call", reason: name + "() outside a show or list function" }; }
        return __lt_render;
    }
    function start(response) { var r = __lt_rendering("start"); r.start = response || {}; r.newHeader = true; }
    function send(chunk) { __lt_rendering("send").chunks.push(chunk.toString()); }
    function getRow() {
        var r = __lt_rendering("getRow");
        if (r.rows === null) { throw { error: "invalid_call", reason: "getRow() outside a list function" }; }
        if (r.lastRow) { return null; }
        if (!r.gotRow) {
            r.gotRow = true;
            __lt_flush(__lt_withContentType(r.start || {}));
            r.start = {};
        } else {
            __lt_flush(r.newHeader ? r.start : null);
        }
        if (r.index < r.rows.length) { return r.rows[r.index++]; }
        r.lastRow = true;
        return null;
    }
    // What CouchDB does with a batch of chunks: new headers, if any, replace the pending ones;
    // the first batch that is not empty starts the response with them.
    function __lt_flush(headers) {
        var r = __lt_render;
        if (headers) { r.headers = headers; }
        r.newHeader = false;
        if (r.chunks.length > 0 && r.chunks.join("") !== "") {
            if (r.committed === null) { r.committed = r.headers || {}; }
            r.body.push(r.chunks.join(""));
        }
        r.chunks = [];
    }
    function __lt_wrapResponse(value) {
        return typeof value === "string" ? { body: value } : value;
    }
    function __lt_typeName(value) {
        if (value === null) { return "null"; }
        return Array.isArray(value) ? "array" : typeof value;
    }
    // An exception from a show, list, update or rewrite function: CouchDB's own errors pass,
    // anything else is `render_error` (or `rewrite_error`) naming it.
    function __lt_renderError(e, kind) {
        if ((e && e.error && e.reason) || (Array.isArray(e) && (e[0] === "error" || e[0] === "fatal"))) { throw e; }
        var text = e && e.stack ? String(e.stack) : __lt_describe(e);
        log("function raised error: " + text);
        return { error: kind || "render_error", reason: "function raised error: " + text };
    }
    function __lt_show(fn, ddoc, doc, req) {
        try {
            __lt_resetRender(null);
            __lt_resetMime();
            var response = __lt_wrapResponse(fn.apply(ddoc, [doc, req]) || {});
            var r = __lt_render;
            // The list() style: chunks sent, headers named by start().
            if (r.chunks.length > 0) {
                response.headers = response.headers || {};
                for (var name in r.start) { response.headers[name] = r.start[name]; }
                response.body = r.chunks.join("") + (response.body || "");
                r.chunks = [];
            }
            if (__lt_mime.provided.length > 0) {
                var provided = __lt_wrapResponse(__lt_runProvides(req, ddoc) || {});
                response.body = (response.body || "") + r.chunks.join("") + (provided.body || "");
                response = __lt_withContentType(response);
            }
            var type = __lt_typeName(response);
            if (type !== "object" && type !== "string") {
                throw ["error", "render_error", "undefined response from show function"];
            }
            return ["resp", __lt_wrapResponse(response)];
        } catch (e) {
            // A show of a document that does not exist, whose function fails on the null: 404.
            if (doc === null && req.path && req.path.length > 5) { throw ["error", "not_found", "document not found"]; }
            throw __lt_renderError(e);
        } finally {
            __lt_render = null;
        }
    }
    function __lt_update(fn, ddoc, doc, req) {
        if (req.method == "GET") { throw ["error", "method_not_allowed", "Update functions do not allow GET"]; }
        var result;
        try { result = fn.apply(ddoc, [doc, req]); } catch (e) { throw __lt_renderError(e); }
        var type = Array.isArray(result) ? __lt_typeName(result[1]) : "undefined";
        if (type !== "object" && type !== "string") {
            throw ["error", "render_error", "undefined response from update function"];
        }
        return ["up", result[0] === undefined ? null : result[0], __lt_wrapResponse(result[1])];
    }
    function __lt_list(fn, ddoc, head, req, rows) {
        try {
            __lt_resetMime();
            __lt_resetRender(rows);
            var tail = fn.apply(ddoc, [head, req]);
            if (__lt_mime.provided.length > 0) { tail = __lt_runProvides(req, ddoc); }
            if (!__lt_render.gotRow) { getRow(); }
            if (tail !== undefined) { __lt_render.chunks.push(String(tail)); }
            var r = __lt_render;
            __lt_flush(r.newHeader ? r.start : null);
            return ["list", r.committed || r.headers || {}, r.body];
        } catch (e) {
            throw __lt_renderError(e);
        } finally {
            __lt_render = null;
        }
    }
    // A rewrite function's answer: ["ok", {path, query, method, headers, body} or {code, ...}],
    // or ["no_dispatch_rule"] when it returned nothing.
    function __lt_rewrite(fn, ddoc, req) {
        var result;
        try { result = fn.apply(ddoc, [req]); } catch (e) { throw __lt_renderError(e, "rewrite_error"); }
        if (!result) { return ["no_dispatch_rule"]; }
        if (typeof result === "string") { result = { path: result, method: req.method }; }
        return ["ok", result];
    }

    // CommonJS modules, resolved as CouchDB resolves them: `require("lib/geo")` is the string
    // at that path of `root`; `./x` and `../x` are relative to the object holding the
    // requiring module. A module runs once (per design document revision) and its
    // `module.exports` is what every require of it gets; a circular require gets `{}`.
    function __lt_requirer(root, cache) {
        function noParent(mod) {
            return { error: "invalid_require_path", reason: "Object has no parent " + JSON.stringify(mod ? mod.current : null) };
        }
        // `from`: the object holding the requiring module (none for a function's own require).
        function resolve(names, from) {
            var mod = from;
            for (var i = 0; i < names.length; i++) {
                var n = names[i];
                if (n === "..") {
                    if (!(mod && mod.parent && mod.parent.parent)) { throw noParent(mod); }
                    mod = { id: mod.id.slice(0, mod.id.lastIndexOf("/")), parent: mod.parent.parent, current: mod.parent.current };
                } else if (n === ".") {
                    if (!(mod && mod.parent)) { throw noParent(mod); }
                    mod = { id: mod.id, parent: mod.parent, current: mod.current };
                } else {
                    // A path that does not start with . or .. starts at the design document.
                    if (i === 0) { mod = { id: "", parent: null, current: root }; }
                    if (mod.current === null || typeof mod.current !== "object" || mod.current[n] === undefined) {
                        throw { error: "invalid_require_path", reason: "Object has no property \"" + n + "\"" };
                    }
                    mod = { id: mod.id ? mod.id + "/" + n : n, parent: mod, current: mod.current[n] };
                }
            }
            if (!mod || typeof mod.current !== "string") {
                throw { error: "invalid_require_path", reason: "Must require a JavaScript string, not: " + (mod ? typeof mod.current : "undefined") };
            }
            return { id: mod.id, parent: mod.parent, current: mod.current, exports: {} };
        }
        function requireFrom(requiring) {
            return function (name) {
                var module = resolve(String(name).split("/"), requiring ? requiring.parent : null);
                if (!cache.hasOwnProperty(module.id)) {
                    cache[module.id] = {};  // what a circular require of it gets
                    var body;
                    try { body = __lt_globalEval("(function (module, exports, require) { " + module.current + "\n})"); } catch (e) {
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
        try { fn = __lt_globalEval("(function (require) { return (" + text + "\n); })")(require); } catch (e) {
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
    // CouchDB's reduce_limit (views.js): an answer longer than 4,096 characters and than half
    // the command's line without the functions' code fails, or is logged with "log".
    function __lt_reduced(sources, reductions) {
        var line = JSON.stringify(reductions);
        var codeSize = 0;
        for (var i = 0; i < sources.length; i++) { codeSize += sources[i].length; }
        var input = __lt.lineLength - codeSize;
        if (__lt.reduceLimit !== "false" && line.length > 4096 && line.length * 2 > input) {
            var message = ["Reduce output must shrink more rapidly:", "input size:", input, "output size:", line.length].join(" ");
            if (__lt.reduceLimit !== "log") { throw ["error", "reduce_overflow_error", message]; }
            __lt.logs.push("reduce_overflow_error: " + message);
        }
        return [true, reductions];
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
            return __lt_show(fn, entry.doc, args[0], args[1]);
        case "updates":
            return __lt_update(fn, entry.doc, args[0], args[1]);
        case "lists":
            return __lt_list(fn, entry.doc, args[0], args[1], args[2]);
        case "rewrites":
            return __lt_rewrite(fn, entry.doc, args[0]);
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
        case "configure":
            __lt.reduceLimit = String(command[1].reduce_limit);
            return true;
        case "reduce":
            var keys = [], values = [];
            for (var k = 0; k < command[2].length; k++) { keys.push(command[2][k][0]); values.push(command[2][k][1]); }
            return __lt_reduced(command[1], command[1].map(function (source) { return __lt_reducer(source)(keys, values, false); }));
        case "rereduce":
            return __lt_reduced(command[1], command[1].map(function (source) { return __lt_reducer(source)(null, command[2], true); }));
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
        __lt.lineLength = line.length;
        try { result = __lt_dispatch(JSON.parse(line)); } catch (e) { result = __lt_error(e); }
        __lt_forgetGlobals();
        var out = "";
        for (var i = 0; i < __lt.logs.length; i++) { out += JSON.stringify(["log", __lt.logs[i]]) + "\n"; }
        return out + JSON.stringify(result === undefined ? null : result);
    }
    function __lt_forgetGlobals() {
        var names = Object.getOwnPropertyNames(global);
        for (var i = 0; i < names.length; i++) {
            if (!__lt_baseline.hasOwnProperty(names[i])) {
                try { delete global[names[i]]; } catch (e) { /* a non-configurable one stays */ }
            }
        }
    }
    function __lt_refuseCode() { throw new EvalError("code cannot be evaluated at run time in design functions"); }
    var api = { emit: emit, log: log, toJSON: toJSON, isArray: isArray, sum: sum, st_index: st_index, start: start,
                send: send, getRow: getRow, provides: provides, registerType: registerType, __lt_handle: __lt_handle,
                eval: __lt_refuseCode, Function: __lt_refuseCode };
    for (var name in api) {
        Object.defineProperty(global, name, { value: api[name], writable: false, enumerable: false, configurable: false });
    }
    Object.defineProperty(__lt_functionPrototype, "constructor", { value: __lt_refuseCode, writable: false, enumerable: false, configurable: false });
    var shared = [Object, Object.prototype, Array, Array.prototype, __lt_functionPrototype, String, String.prototype, Number,
                  Number.prototype, Boolean, Boolean.prototype, Date, Date.prototype, RegExp, RegExp.prototype, Error,
                  Error.prototype, JSON, Math];
    if (typeof Duktape === "object") { shared.push(Duktape); }
    for (var i = 0; i < shared.length; i++) { Object.freeze(shared[i]); }
    var __lt_baseline = {};
    var names = Object.getOwnPropertyNames(global);
    for (var j = 0; j < names.length; j++) { __lt_baseline[names[j]] = true; }
    })(this);
    """#
}
