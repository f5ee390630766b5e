import CouchJSON
import Foundation
public import Hummingbird
public import HummingbirdCore
public import NIOCore
public import NIOHTTPTypes

/// Limits on the connections of one listener, so that slow or silent clients cannot hold the
/// server's connections (slowloris) and one address cannot take them all.
public struct ConnectionLimits: Sendable {
    /// How long a connection may wait for a request's head: from connecting, or after its last
    /// answer (an idle keep-alive connection). Headers sent too slowly run into it too.
    public var requestHeadTimeout: Duration = .seconds(60)
    /// The longest pause while a request's body arrives.
    public var bodyReadTimeout: Duration = .seconds(30)
    /// The longest a whole request body may take to arrive, however steadily it trickles.
    public var bodyDeadline: Duration = .seconds(600)
    /// Connections open at once on the listener; beyond it, new ones wait to be accepted.
    public var maxConnections = 2048
    /// Connections open at once from one address (trusted proxies exempt); beyond it, new ones
    /// are closed at once.
    public var maxConnectionsPerAddress = 256
    /// Addresses exempt from the per-address limit (reverse proxies carry many clients).
    public var clientAddress = ClientAddress()

    public init() {}

    /// A new handler for one connection, counting it in `counter` (connections per address).
    func handler(_ counter: KeyedCounter) -> ConnectionGuard {
        ConnectionGuard(limits: self, counter: counter)
    }

    /// An HTTP/1.1 server that keeps to these limits (each listener its own counter).
    public var server: HTTPServerBuilder {
        let counter = KeyedCounter()
        return .http1(configuration: .init(additionalChannelHandlers: [self.handler(counter)]))
    }

    /// A listener's configuration at `address`, accepting at most `maxConnections` at once.
    public func configuration(address: BindAddress, serverName: String?) -> ApplicationConfiguration {
        .init(
            address: address, serverName: serverName,
            availableConnectionsDelegate: MaximumAvailableConnections(maxConnections))
    }
}

/// Closes a connection that waits too long for a request's head or pauses too long inside a
/// body, and one beyond its address's share of connections. Sits after the HTTP decoder
/// (Hummingbird's `additionalChannelHandlers`), so it sees request and response parts; while
/// an answer is being written (a long poll, a continuous feed) no timer runs.
public final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    let limits: ConnectionLimits
    let counter: KeyedCounter
    private var counted: String?
    private var activated = false
    private var timer: Scheduled<Void>?
    /// Inside a request body (head read, end not yet).
    private var readingBody = false
    /// When the body being read must have arrived whole.
    private var bodyDeadline = NIODeadline.distantFuture
    /// Requests read whose answers have not ended.
    private var unanswered = 0
    /// A CONNECT request was read: the connection ends with its answer.
    private var closeAfterAnswer = false

    init(limits: ConnectionLimits, counter: KeyedCounter) {
        self.limits = limits
        self.counter = counter
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        _ = ConnectionStates.shared.gone(context.channel)
        if context.channel.isActive { activate(context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    public func channelActive(context: ChannelHandlerContext) {
        activate(context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        release()
        ConnectionStates.shared.closed(context.channel)
        context.fireChannelInactive()
    }

    /// The client closed its side (the listener allows half-closed connections, so the channel
    /// stays open): nobody will read an answer, and long work for it stops (`clientGone`).
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            ConnectionStates.shared.gone(context.channel).set()
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func activate(_ context: ChannelHandlerContext) {
        guard !activated else { return }
        activated = true
        if let address = context.channel.remoteAddress?.ipAddress, !limits.clientAddress.isTrusted(address) {
            guard counter.enter(address, limit: limits.maxConnectionsPerAddress) else {
                context.close(promise: nil)
                return
            }
            counted = address
        }
        arm(context, limits.requestHeadTimeout)
    }

    private func release() {
        timer?.cancel()
        timer = nil
        if let address = counted {
            counter.leave(address)
            counted = nil
        }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head) where head.method == .connect:
            // The HTTP decoder treats CONNECT as the start of a tunnel and reads no further, so
            // the request would never end: it is answered as a request without a body (CouchDB
            // answers it like any other method), and the connection closes after the answer.
            closeAfterAnswer = true
            unanswered += 1
            disarm()
            context.fireChannelRead(data)
            context.fireChannelRead(wrapInboundOut(.end(nil)))
            return
        case .head:
            readingBody = true
            bodyDeadline = .now() + TimeAmount(limits.bodyDeadline)
            armForBody(context)
        case .body:
            if readingBody { armForBody(context) }
        case .end:
            readingBody = false
            unanswered += 1
            disarm()
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            if closeAfterAnswer {
                let channel = context.channel
                context.writeAndFlush(data).whenComplete { result in
                    promise?.completeWith(result)
                    channel.close(promise: nil)
                }
                return
            }
            unanswered = max(0, unanswered - 1)
            // Answered before its body was read (a refusal): the body's pauses still count.
            if unanswered == 0, !readingBody { arm(context, limits.requestHeadTimeout) }
        }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: Duration) {
        arm(context, TimeAmount(timeout))
    }

    private func arm(_ context: ChannelHandlerContext, _ amount: TimeAmount) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: amount) { channel.close(promise: nil) }
    }

    /// Inside a body: the pause allowed, or what is left of the whole body's time if less.
    private func armForBody(_ context: ChannelHandlerContext) {
        arm(context, min(TimeAmount(limits.bodyReadTimeout), bodyDeadline - .now()))
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}

extension TimeAmount {
    /// A duration in nanoseconds, saturating.
    init(_ duration: Duration) {
        let nanoseconds = duration.components.seconds.multipliedSaturating(by: 1_000_000_000)
        self = .nanoseconds(nanoseconds.addingSaturating(Int64(duration.components.attoseconds / 1_000_000_000)))
    }
}
