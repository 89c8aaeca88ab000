// swift-tools-version: 6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "TodoB2C",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "todo-server", targets: ["todo-server"]),
        .executable(name: "todo", targets: ["todo"]),
        .executable(name: "todo-mcp", targets: ["todo-mcp"]),
        .library(name: "IdentityClient", targets: ["IdentityClient"]),
        .library(name: "TaskClient", targets: ["TaskClient"]),
        // The whole system in-process for an app's own tests (SPEC §6).
        .library(name: "TodoB2CTesting", targets: ["TodoB2CTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-kit", from: "2.17.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // OpenTelemetry (SPEC §2.13): the API packages everywhere, the OTLP/HTTP exporter in `serve`
        // only (its gRPC exporter left out: another 3 packages to build, and collectors take HTTP).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        // `todo-server mcp`: the Model Context Protocol over stdio (SPEC §6).
        .package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"),
    ],
    targets: [
        // The shared data types: the Task API's DTOs, the text rules, ClientSettings.
        .target(name: "TodoModels", swiftSettings: swiftSettings),
        // Small codecs every part needs: form and JSON escaping, base64url, hex, UUID text, random secrets.
        .target(name: "WireCoding", swiftSettings: swiftSettings),
        // The one JOSE implementation: RS256 compact JWS and RSA JWKs, for signing and verifying.
        .target(
            name: "JOSE",
            dependencies: [
                "WireCoding", .product(name: "Crypto", package: "swift-crypto"), .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // B2C's Identity Experience Framework policy language: the XML reader with its limits,
        // inheritance and merge, the whole-policy checks, the compiled policy and the claims
        // transformations. Pure: no server, no store, no journey (ARCHITECTURE.md).
        .target(
            name: "TrustFramework",
            dependencies: ["WireCoding", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Server-side pieces every HTTP part shares (response headers).
        .target(
            name: "ServerSupport",
            dependencies: [
                "WireCoding", "Storage", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SDK: Foundation, swift-crypto and swift-log only, so an iOS app can take it without a
        // server stack (ARCHITECTURE.md). It never imports a server module.
        // IdentityClientCore is all of it but URLSession, for servers that embed the SDK (the web
        // app): on Linux URLSession is FoundationNetworking, which loads libcurl and its TLS and
        // Kerberos libraries (11 MB of idle RSS). IdentityClient, what apps import, re-exports the
        // core and adds `URLSessionTransport` as the default transport; TaskClient likewise.
        .target(
            name: "IdentityClientCore",
            dependencies: [
                "TodoModels",
                "WireCoding",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "IdentityClient", dependencies: ["IdentityClientCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        .target(name: "TaskClientCore", dependencies: ["IdentityClientCore", "TodoModels"], swiftSettings: swiftSettings),
        .target(name: "TaskClient", dependencies: ["TaskClientCore", "IdentityClient"], swiftSettings: swiftSettings),
        // The SDK's transport over AsyncHTTPClient, for the web app and the CLI: pooled
        // connections and an extra CA to trust (the development CA of `serve --tls`).
        .target(
            name: "HTTPClientTransport",
            dependencies: [
                "IdentityClientCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "WebApp",
            dependencies: [
                "IdentityClientCore",
                "TaskClientCore",
                "TodoModels",
                "WireCoding",
                "Storage",
                "ServerSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SQLKit", package: "sql-kit"),
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "todo",
            dependencies: [
                "HTTPClientTransport",
                "IdentityClient",
                "TaskClient",
                "TodoModels",
                "WireCoding",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TaskService",
            dependencies: [
                "JOSE",
                "Storage",
                "ServerSupport",
                "TodoModels",
                "WireCoding",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SQLKit", package: "sql-kit"),
            ],
            resources: [.copy("Resources/openapi.json")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Storage",
            dependencies: [
                "WireCoding",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The identity service's directory and stores: tenants and their declarations, accounts,
        // passwords and second factors, grants and signing keys, stored custom policies and key
        // sets, the administration facade, and the failure vocabulary every layer above speaks.
        // Journeys and protocol endpoints build on it; it knows neither (ARCHITECTURE.md).
        .target(
            name: "IdentityDirectory",
            dependencies: [
                "JOSE",
                "TrustFramework",
                "Storage",
                "ServerSupport",
                "TodoModels",
                "WireCoding",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // The journey engine and its steps: the hosted pages, the dialects of the two faces, token
        // issuance, federation with upstream providers, and custom policies as they run. Built on
        // the directory; the protocol endpoints, Graph and the routes build on it (ARCHITECTURE.md).
        .target(
            name: "UserJourneys",
            dependencies: [
                "IdentityDirectory",
                "TrustFramework",
                "JOSE",
                "Storage",
                "ServerSupport",
                "TodoModels",
                "WireCoding",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdOTP", package: "hummingbird-auth"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLKit", package: "sql-kit"),
            ],
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "IdentityServer",
            dependencies: [
                "IdentityDirectory",
                "UserJourneys",
                "JOSE",
                "TrustFramework",
                "Storage",
                "ServerSupport",
                "TodoModels",
                "WireCoding",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "SQLKit", package: "sql-kit"),
            ],
            // The admin console's templates and stylesheet.
            resources: [.copy("Resources")],
            swiftSettings: swiftSettings
        ),
        // The composition root: configuration and wiring of every part, for `serve` and the system tests.
        .target(
            name: "TodoSystem",
            dependencies: [
                "UserJourneys",
                "IdentityDirectory",
                "HTTPClientTransport",
                "IdentityServer",
                "TaskService",
                "WebApp",
                "IdentityClientCore",
                "Storage",
                "TodoModels",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                // HTTP parts as the server pipeline passes them (RequestPacing's handlers).
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The whole system in an app's own test process, on free loopback ports, with the
        // test-control surface as Swift calls (SPEC §6). Built by the composition root.
        .target(
            name: "TodoB2CTesting",
            dependencies: [
                "TodoSystem",
                "IdentityServer",
                "IdentityDirectory",
                "WireCoding",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The Model Context Protocol server for coding agents (`todo-server mcp` runs it): a binary
        // of its own, as the MCP SDK brings FoundationNetworking, which todo-server keeps out.
        .executableTarget(
            name: "todo-mcp",
            dependencies: [
                "TodoB2CTesting",
                "TodoSystem",
                "ServerSupport",
                .product(name: "MCP", package: "swift-sdk"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // `todo-server --version` names the commit the binary was built from (SPEC §6).
        .plugin(name: "BuildCommit", capability: .buildTool()),
        .executableTarget(
            name: "todo-server",
            dependencies: [
                .product(name: "OTel", package: "swift-otel"),
                "UserJourneys",
                "IdentityDirectory",
                "TodoSystem",
                "TrustFramework",
                "ServerSupport",
                .product(name: "Logging", package: "swift-log"),
                "IdentityServer",
                "Storage",
                "TodoModels",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildCommit"]
        ),
        .target(
            name: "TestSupport",
            dependencies: [
                "Storage", .product(name: "Logging", package: "swift-log"), .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StorageTests",
            dependencies: ["Storage", "TestSupport", .product(name: "SQLKit", package: "sql-kit"), .product(name: "PostgresKit", package: "postgres-kit")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TaskServiceTests",
            dependencies: [
                "IdentityDirectory",
                "TaskService",
                "TodoModels",
                "WireCoding",
                "IdentityServer",
                "Storage",
                "TestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),
        // The library as an app's suite uses it: only its public surface (and the README's example).
        .testTarget(name: "TodoB2CTestingTests", dependencies: ["TodoB2CTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "JOSETests",
            dependencies: [
                "JOSE", "WireCoding", .product(name: "Crypto", package: "swift-crypto"), .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SDK alone: no server module.
        .testTarget(
            name: "IdentityClientTests",
            dependencies: ["IdentityClient", "IdentityClientCore", "TodoModels", "WireCoding"],
            swiftSettings: swiftSettings
        ),
        // The whole system on loopback sockets, built by the composition root as `serve` builds
        // it, driven by the SDK, the CLI's settings and a browser-like client.
        .testTarget(
            name: "SystemTests",
            dependencies: [
                "UserJourneys",
                "IdentityDirectory",
                "TodoSystem",
                "TodoB2CTesting",
                "IdentityClient",
                "WebApp",
                "TaskClient",
                "TodoModels",
                "WireCoding",
                "IdentityServer",
                "TaskService",
                "Storage",
                "TestSupport",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IdentityServerTests",
            dependencies: [
                "UserJourneys",
                "IdentityDirectory",
                "IdentityServer",
                "TrustFramework",
                "ServerSupport",
                "TodoModels",
                "WireCoding",
                "Storage",
                "TestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "HummingbirdOTP", package: "hummingbird-auth"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "JOSE",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
