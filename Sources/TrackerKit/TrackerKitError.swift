/// What goes wrong in TrackerKit, as one type over a private kind (the way AsyncHTTPClient's
/// `HTTPClientError` is): the server's answer to an application call, a track file that cannot be
/// read, the Keychain, the location service. Ask which with `isServerAnswer`, `isUnreadableTrack`…;
/// a kind added later breaks no caller's `switch`.
///
/// ```swift
/// do {
///     try await client.login(username: "ada", password: password)
/// } catch let error as TrackerKitError where error.isServerAnswer && error.status == 401 {
///     // wrong name or password
/// }
/// ```
public struct TrackerKitError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Kind: Sendable, Equatable {
        case serverAnswer, unreadableTrack, keychain, locationService
    }

    private let kind: Kind
    /// A server answer's HTTP status, or the Keychain's `OSStatus`; 0 for the other kinds.
    public let status: Int
    /// A server answer's `error` (`unauthorized`, `conflict`…); empty for the other kinds.
    public let error: String
    /// What went wrong, in words: a server answer's `reason` (when it gave one), why a track
    /// file cannot be read, what the location service said.
    public let reason: String?

    private init(_ kind: Kind, status: Int = 0, error: String = "", reason: String?) {
        self.kind = kind
        self.status = status
        self.error = error
        self.reason = reason
    }

    /// The server answered an application call with something other than success.
    public static func serverAnswer(status: Int, error: String, reason: String?) -> TrackerKitError {
        TrackerKitError(.serverAnswer, status: status, error: error, reason: reason)
    }

    /// A file that cannot be read as a track (or a drive's option that cannot be understood).
    public static func unreadableTrack(_ reason: String) -> TrackerKitError {
        TrackerKitError(.unreadableTrack, reason: reason)
    }

    /// A Keychain call failed with this `OSStatus`.
    public static func keychain(status: Int32) -> TrackerKitError {
        TrackerKitError(.keychain, status: Int(status), reason: nil)
    }

    /// The location service failed.
    public static func locationService(_ message: String) -> TrackerKitError {
        TrackerKitError(.locationService, reason: message)
    }

    public var isServerAnswer: Bool { kind == .serverAnswer }
    public var isUnreadableTrack: Bool { kind == .unreadableTrack }
    public var isKeychain: Bool { kind == .keychain }
    public var isLocationService: Bool { kind == .locationService }

    public var description: String {
        switch kind {
        case .serverAnswer: "\(status) \(error)" + (reason.map { ": \($0)" } ?? "")
        case .keychain: "Keychain error \(status)"
        case .unreadableTrack, .locationService: reason ?? ""
        }
    }
}
