#if canImport(AuthenticationServices)
    import AuthenticationServices
    import Foundation

    /// `ASWebAuthenticationSession`: the system's sign-in sheet on iOS and macOS, which shares
    /// cookies with Safari unless `prefersEphemeralSession` is set (then sign-out needs no browser
    /// round trip, and the "wants to use … to sign in" prompt says what it means; https://github.com/AzureAD/microsoft-authentication-library-for-objc/issues/2411
    /// §B.1 item 2). The redirect URI must use a custom scheme (`msauth.<bundle id>://auth`), so the
    /// response mode is `query`.
    ///
    /// ```swift
    /// let authenticator = SystemWebAuthenticator { view.window! }
    /// ```
    public struct SystemWebAuthenticator: WebAuthenticator {
        public var prefersEphemeralSession: Bool
        let anchor: @MainActor @Sendable () -> ASPresentationAnchor

        /// - Parameters:
        ///   - prefersEphemeralSession: no shared cookies with Safari.
        ///   - anchor: the window to present the sheet over.
        public init(prefersEphemeralSession: Bool = false, anchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor) {
            self.prefersEphemeralSession = prefersEphemeralSession
            self.anchor = anchor
        }

        public func authenticate(redirectURI: String, start: @Sendable (String, ResponseMode) async throws -> URL) async throws -> [String:
            String]
        {
            guard let scheme = URLComponents(string: redirectURI)?.scheme, scheme != "http", scheme != "https" else {
                throw IdentityError.invalidConfiguration(
                    "ASWebAuthenticationSession needs a custom-scheme redirect URI, not \(redirectURI)")
            }
            let url = try await start(redirectURI, .query)
            let ephemeral = prefersEphemeralSession
            let anchor = self.anchor
            let callback: URL = try await withCheckedThrowingContinuation { continuation in
                Task { @MainActor in
                    let provider = AnchorProvider(anchor: anchor())
                    let holder = SessionHolder()
                    let session = ASWebAuthenticationSession(url: url, callbackURLScheme: scheme) { url, error in
                        // The provider and the session itself are held by this closure until it runs:
                        // the session keeps only a weak reference to its provider, and a session
                        // nobody holds is dismissed without calling back.
                        _ = provider
                        holder.session = nil
                        if let url {
                            continuation.resume(returning: url)
                        } else if let error = error as? ASWebAuthenticationSessionError, error.code == .canceledLogin {
                            continuation.resume(throwing: IdentityError.userCanceled)
                        } else {
                            continuation.resume(throwing: IdentityError.network(error?.localizedDescription ?? "no callback"))
                        }
                    }
                    holder.session = session
                    session.presentationContextProvider = provider
                    session.prefersEphemeralWebBrowserSession = ephemeral
                    if !session.start() {
                        continuation.resume(throwing: IdentityError.invalidConfiguration("the sign-in sheet could not start"))
                    }
                }
            }
            return ScriptedWebAuthenticator.parameters(fromRedirect: callback)
        }
    }

    @MainActor
    final class SessionHolder {
        var session: ASWebAuthenticationSession?
    }

    @MainActor
    final class AnchorProvider: NSObject, ASWebAuthenticationPresentationContextProviding {
        let anchor: ASPresentationAnchor

        init(anchor: ASPresentationAnchor) { self.anchor = anchor }

        nonisolated func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
            MainActor.assumeIsolated { anchor }
        }
    }
#endif
