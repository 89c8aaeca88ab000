import Foundation
import PackagePlugin

/// Writes `BuildCommit.swift` (the commit the binary is built from) before every build of the
/// target it is applied to, for `todo-server --version` (SPEC §6).
///
/// A prebuild command, not a build command: the commit changes without any input file SwiftPM
/// tracks. The file is rewritten only when the commit changes, so an unchanged tree compiles
/// nothing again. Outside a git checkout (a source archive) the commit is `TODO_BUILD_COMMIT`
/// from the environment, or "unknown".
@main
struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "Generated")
        let script = #"""
            set -eu
            root=$1; out=$2
            mkdir -p "$out"
            commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || true)
            if [ -n "$commit" ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
              commit="$commit-modified"
            fi
            [ -n "$commit" ] || commit=${TODO_BUILD_COMMIT:-unknown}
            printf '/// Written by the BuildCommit plugin: the commit this binary was built from.\nlet buildCommit = "%s"\n' "$commit" >"$out/BuildCommit.swift.next"
            if cmp -s "$out/BuildCommit.swift.next" "$out/BuildCommit.swift"; then rm "$out/BuildCommit.swift.next"
            else mv "$out/BuildCommit.swift.next" "$out/BuildCommit.swift"; fi
            """#
        var environment: [String: String] = [:]
        if let commit = ProcessInfo.processInfo.environment["TODO_BUILD_COMMIT"] { environment["TODO_BUILD_COMMIT"] = commit }
        return [
            .prebuildCommand(
                displayName: "Recording the build's commit",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "build-commit", context.package.directoryURL.path, output.path],
                environment: environment,
                outputFilesDirectory: output)
        ]
    }
}
