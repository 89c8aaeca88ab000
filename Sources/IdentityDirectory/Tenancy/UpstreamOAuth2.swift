import Foundation

/// A plain OAuth 2.0 provider's endpoints (B2C's `Protocol Name="OAuth2"` technical profile,
/// oauth2-technical-profile.md), for a custom policy's identity provider that has no discovery
/// document and no ID token: the code is redeemed at `AccessTokenEndpoint` and the user's claims
/// are read from `ClaimsEndpoint` with the access token.
public struct UpstreamOAuth2: Sendable, Equatable {
    package var authorizationEndpoint: String
    package var tokenEndpoint: String
    package var claimsEndpoint: String
    /// `BearerTokenTransmissionMethod` `AuthorizationHeader`; B2C's default sends the token in
    /// the claims endpoint's query, named `ClaimsEndpointAccessTokenName` (`access_token`).
    package var tokenInHeader: Bool
    package var tokenParameterName: String
    /// `ClaimsEndpointFormatName`=`ClaimsEndpointFormat`, added to the claims request's query.
    package var claimsFormat: ClaimsFormat?
    /// `HttpBinding` `GET`: the token request's parameters in the query of a GET (B2C's Facebook
    /// profile uses it); otherwise a form POST (RFC 6749 §4.1.3).
    package var tokenByGet: Bool

    package init(
        authorizationEndpoint: String, tokenEndpoint: String, claimsEndpoint: String, tokenInHeader: Bool, tokenParameterName: String,
        claimsFormat: ClaimsFormat?, tokenByGet: Bool
    ) {
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.claimsEndpoint = claimsEndpoint
        self.tokenInHeader = tokenInHeader
        self.tokenParameterName = tokenParameterName
        self.claimsFormat = claimsFormat
        self.tokenByGet = tokenByGet
    }

    package struct ClaimsFormat: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The metadata a flow uses, made from the endpoints (there is no discovery to fetch): the
    /// authorization endpoint stands as the provider's issuer, its users kept under it.
    package func metadata() -> UpstreamMetadata {
        UpstreamMetadata(
            issuer: authorizationEndpoint, authorizationEndpoint: authorizationEndpoint, tokenEndpoint: tokenEndpoint, jwksURI: "")
    }
}
