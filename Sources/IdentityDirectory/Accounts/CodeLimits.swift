/// How many verification codes (sign-up and password reset) one address may be sent, and how
/// many wrong codes may be tried for it, in a window, across transactions: each transaction
/// brings a new code and its own 5 tries, so without a count per address a patient attacker
/// guesses a reset code in time (the second outside attack's F-3), and anyone can fill a
/// mailbox and the outbox (F-4). Beyond either limit the pages answer with B2C's throttling
/// message until the window has passed.
public struct CodeLimits: Sendable, Equatable {
    public var windowSeconds: Int
    public var sendsPerAddress: Int64
    public var wrongPerAddress: Int64

    /// An hour; 10 codes sent and 10 wrong codes per address in it: a person who mistypes or
    /// asks again never meets it, and 10 guesses of a 6-digit code in an hour are nothing.
    public static let `default` = CodeLimits(windowSeconds: 3600, sendsPerAddress: 10, wrongPerAddress: 10)

    public init(windowSeconds: Int, sendsPerAddress: Int64, wrongPerAddress: Int64) {
        self.windowSeconds = windowSeconds
        self.sendsPerAddress = sendsPerAddress
        self.wrongPerAddress = wrongPerAddress
    }
}
