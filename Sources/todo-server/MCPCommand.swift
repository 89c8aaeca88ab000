import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `todo-server mcp`: runs `todo-mcp`, the Model Context Protocol server for coding agents
/// (SPEC §6), from the directory this binary is in (`swift build` and an install put them side
/// by side). It is a binary of its own because the MCP SDK brings FoundationNetworking, which
/// this server keeps out (see `TodoMCP`).
struct MCPCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "Serve the Model Context Protocol over stdio (runs todo-mcp): a throw-away system and its test-control tools.")

    @Argument(parsing: .allUnrecognized, help: "Passed to todo-mcp (--tenant-config, --log-level).") var arguments: [String] = []

    func run() throws {
        let own = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let candidates = [
            ProcessInfo.processInfo.environment["TODO_MCP_BIN"], (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                .map { URL(fileURLWithPath: $0).deletingLastPathComponent().appendingPathComponent("todo-mcp").path },
            own.deletingLastPathComponent().appendingPathComponent("todo-mcp").path,
        ].compactMap { $0 }
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ValidationError("todo-mcp was not found beside todo-server (build it: swift build --product todo-mcp), nor in TODO_MCP_BIN")
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        throw ValidationError("could not run \(path): \(String(cString: strerror(errno)))")
    }
}
