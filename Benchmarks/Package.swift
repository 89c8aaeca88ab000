// swift-tools-version: 6.2
// Benchmarks (ordo-one/benchmark), kept in their own package so the main build and CI never
// compile the benchmark harness. Run: `cd Benchmarks && swift package benchmark`.
import PackageDescription

let package = Package(
    name: "TodoB2CBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "TodoB2C", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "IdentityClientBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "IdentityClient", package: "TodoB2C"),
            ],
            path: "Benchmarks/IdentityClientBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
