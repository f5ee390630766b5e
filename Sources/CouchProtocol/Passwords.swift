public import CouchJSON
import Crypto
import _CryptoExtras
import Foundation
import NIOPosix

/// PBKDF2 password hashing as CouchDB 3.4 stores it (`pbkdf2_prf` sha256 by default, sha1 read
/// for older documents), and constant-time comparison.
public enum Passwords {
    public static let defaultIterations = 600_000

    public struct Hash: Sendable, Equatable {
        public var derivedKey: String  // hex
        public var salt: String  // hex
        public var iterations: Int
        public var prf: String  // "sha256" or "sha"

        public init(derivedKey: String, salt: String, iterations: Int, prf: String) {
            self.derivedKey = derivedKey
            self.salt = salt
            self.iterations = iterations
            self.prf = prf
        }

        /// The hash stored in a CouchDB-style user document (`derived_key`, `salt`,
        /// `iterations`, `pbkdf2_prf`). Missing fields give a hash no password matches.
        public init(stored doc: JSON, defaultIterations: Int, defaultPRF: String = "sha256") {
            self.init(
                derivedKey: doc["derived_key"]?.stringValue ?? "", salt: doc["salt"]?.stringValue ?? "00",
                iterations: doc["iterations"]?.intValue ?? defaultIterations,
                prf: doc["pbkdf2_prf"]?.stringValue ?? defaultPRF)
        }
    }

    /// Hashes a new password with a random 16-byte salt.
    public static func hash(_ password: String, iterations: Int = defaultIterations) throws -> Hash {
        let salt = Hex.random(bytes: 16)
        let key = try derive(password, salt: salt, iterations: iterations, prf: "sha256")
        return Hash(derivedKey: key, salt: salt, iterations: iterations, prf: "sha256")
    }

    static func derive(_ password: String, salt: String, iterations: Int, prf: String) throws -> String {
        let function: KDF.Insecure.PBKDF2.HashFunction
        let length: Int
        switch prf {
        case "sha256": function = .sha256; length = 32
        case "sha384": function = .sha384; length = 48
        case "sha512": function = .sha512; length = 64
        default: function = .insecureSHA1; length = 20
        }
        // CouchDB uses the hex salt text itself as the salt bytes.
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: Array(salt.utf8), using: function,
            outputByteCount: length, unsafeUncheckedRounds: max(1, iterations))
        return key.withUnsafeBytes { Hex.string($0) }
    }

    /// Checks a password against a stored hash in constant time.
    public static func verify(_ password: String, against hash: Hash) -> Bool {
        guard let derived = try? derive(password, salt: hash.salt, iterations: hash.iterations, prf: hash.prf) else {
            return false
        }
        return constantTimeEquals(Array(derived.utf8), Array(hash.derivedKey.lowercased().utf8))
    }

    /// `hash(_:iterations:)` on NIO's pool for blocking work, so that a PBKDF2 run (tens of
    /// milliseconds) holds up no event loop or concurrency thread serving other requests.
    public static func hash(_ password: String, iterations: Int = defaultIterations) async throws -> Hash {
        try await offTheServingThreads(iterations) { try hash(password, iterations: iterations) }
    }

    /// `verify(_:against:)` on NIO's pool for blocking work (see `hash`).
    public static func verify(_ password: String, against hash: Hash) async -> Bool {
        (try? await offTheServingThreads(hash.iterations) { verify(password, against: hash) }) ?? false
    }

    /// Runs `work` on NIO's blocking-work pool when it costs enough to be worth the hop.
    private static func offTheServingThreads<T: Sendable>(
        _ iterations: Int, _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        guard iterations >= 1_000 else { return try work() }
        return try await NIOThreadPool.singleton.runIfActive(work)
    }

    /// Compares two byte strings without an early exit on the first difference.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    /// The server-admin form CouchDB writes into its ini file: `-pbkdf2-KEY,SALT,ITERATIONS`
    /// (sha256 here; CouchDB 3.4 writes `-pbkdf2:sha256-...`).
    public static func adminString(_ hash: Hash) -> String {
        "-pbkdf2:\(hash.prf)-\(hash.derivedKey),\(hash.salt),\(hash.iterations)"
    }

    public static func parseAdminString(_ text: String) -> Hash? {
        var rest = Substring(text)
        var prf = "sha"
        if rest.hasPrefix("-pbkdf2:") {
            rest = rest.dropFirst("-pbkdf2:".count)
            guard let dash = rest.firstIndex(of: "-") else { return nil }
            prf = String(rest[..<dash])
            rest = rest[rest.index(after: dash)...]
        } else if rest.hasPrefix("-pbkdf2-") {
            rest = rest.dropFirst("-pbkdf2-".count)
        } else {
            return nil
        }
        let parts = rest.split(separator: ",")
        guard parts.count == 3, let iterations = Int(parts[2]) else { return nil }
        return Hash(derivedKey: String(parts[0]), salt: String(parts[1]), iterations: iterations, prf: prf)
    }
}
