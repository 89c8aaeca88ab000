import Foundation

/// The rule for URLs the services call out to (API connectors, upstream providers and their
/// endpoints, a custom policy's REST profiles): https anywhere, plain http only on loopback (a
/// local endpoint in development), never credentials in the URL or another scheme. Pure, so a
/// policy can be checked against it at upload without the HTTP client.
public enum OutboundURLRule {
    public static func isAllowed(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
            !host.isEmpty,
            url.user == nil, url.password == nil
        else { return false }
        switch scheme {
        case "https": return true
        case "http": return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.")
        default: return false
        }
    }
}
