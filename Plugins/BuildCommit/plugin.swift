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
            # The checkout is this package's own (safe.directory: CI may clone as another user);
            # no optional locks, so a build never holds the index lock.
            git_here() { git -c safe.directory="$root" --no-optional-locks -C "$root" "$@" 2>/dev/null; }
            commit=""
            top=$(git_here rev-parse --show-toplevel || true)
            if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$(cd "$root" && pwd -P)" ]; then
              commit=$(git_here rev-parse --short=12 HEAD || true)
              if [ -n "$commit" ] && [ -n "$(git_here status --porcelain --untracked-files=no)" ]; then
                commit="$commit-modified"
              fi
            fi
            [ -n "$commit" ] || commit=${TODO_BUILD_COMMIT:-unknown}
            # Only what a commit id or a version is made of reaches the Swift string.
            commit=$(printf %s "$commit" | tr -cd '0-9A-Za-z._+-' | cut -c1-64)
            [ -n "$commit" ] || commit=unknown
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
