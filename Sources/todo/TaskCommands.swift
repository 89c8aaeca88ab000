import ArgumentParser
import Foundation
import TaskClient
import TodoModels

/// Tasks as `todo` numbers them: oldest first, from 1, so adding a task never renumbers the
/// others. A task can also be named by the first characters (4 or more) of its id.
struct NumberedTasks {
    let items: [TaskItem]

    init(_ newestFirst: [TaskItem]) { items = newestFirst.reversed() }

    func number(of task: TaskItem) -> Int? { items.firstIndex { $0.id == task.id }.map { $0 + 1 } }

    func resolve(_ reference: String) throws -> TaskItem {
        let prefix = reference.lowercased()
        // An id prefix first: an 8-digit prefix like "37030420" is an id, not task 37,030,420.
        let matches = prefix.count >= 4 ? items.filter { $0.id.uuidString.lowercased().hasPrefix(prefix) } : []
        if matches.count == 1 { return matches[0] }
        if matches.count > 1 { throw CommandError("'\(reference)' matches \(matches.count) tasks; give more of the id") }
        if let number = Int(reference) {
            guard number >= 1, number <= items.count else {
                throw CommandError("no task \(number) (you have \(items.count); see `todo list`)")
            }
            return items[number - 1]
        }
        guard prefix.count >= 4 else { throw CommandError("'\(reference)' is neither a task number nor an id prefix (4+ characters)") }
        throw CommandError("no task with id \(reference)")
    }

    static func line(_ task: TaskItem, number: Int) -> String {
        let box = task.completed ? Terminal.green("[x]") : "[ ]"
        let title = task.completed ? Terminal.dim(task.title) : task.title
        return "\(String(number).leftPadded(to: 3)) \(box) \(title)  \(Terminal.dim(String(task.id.uuidString.lowercased().prefix(8))))"
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List your tasks.")

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Only open tasks.") var open = false
    @Flag(help: "Only completed tasks.") var done = false

    func validate() throws {
        if open && done { throw ValidationError("choose --open or --done, not both") }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try Session(global)
            let tasks = try await session.tasks()
            let all = try await tasks.all()
            if global.json {
                let shown = all.filter { task in open ? !task.completed : done ? task.completed : true }
                print(try Terminal.json(shown))
                return
            }
            let numbered = NumberedTasks(all)
            let shown = numbered.items.filter { task in open ? !task.completed : done ? task.completed : true }
            if shown.isEmpty {
                print(all.isEmpty ? "No tasks yet. Add one with `todo add \"Buy milk\"`." : "No \(open ? "open" : "completed") tasks.")
                return
            }
            for task in shown { print(NumberedTasks.line(task, number: numbered.number(of: task) ?? 0)) }
            let remaining = all.filter { !$0.completed }.count
            print(Terminal.dim("\(remaining) open, \(all.count - remaining) done"))
        }
    }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a task.")

    @OptionGroup var global: GlobalOptions
    @Argument(parsing: .remaining, help: "The title.") var title: [String]

    func run() async throws {
        try await reportingFailures {
            let text = title.joined(separator: " ")
            guard TaskLimits.normalizedTitle(text) != nil else {
                throw CommandError("a title needs 1 to \(TaskLimits.titleMaximumLength) characters")
            }
            let session = try Session(global)
            let tasks = try await session.tasks()
            let created = try await tasks.create(title: text).task
            if global.json {
                print(try Terminal.json(created))
                return
            }
            let number = NumberedTasks(try await tasks.all()).number(of: created) ?? 0
            print("Added \(NumberedTasks.line(created, number: number).trimmingCharacters(in: .whitespaces))")
        }
    }
}

/// `done`, `undo`, `rename` and `rm`: find the task, then change it with `If-Match`, so an edit
/// made meanwhile elsewhere is not overwritten.
struct TaskEdit {
    static func apply(
        _ global: GlobalOptions, _ reference: String, _ change: @escaping (TaskClient, TaskItem, String?) async throws -> TaskItem?,
        verb: String
    ) async throws {
        try await reportingFailures {
            let session = try Session(global)
            let tasks = try await session.tasks()
            let numbered = NumberedTasks(try await tasks.all())
            let task = try numbered.resolve(reference)
            let etag = try await tasks.get(task.id).etag
            let changed = try await change(tasks, task, etag)
            if global.json {
                print(try changed.map { try Terminal.json($0) } ?? Terminal.json(["deleted": task.id.uuidString.lowercased()]))
            } else {
                print(
                    "\(verb) \(NumberedTasks.line(changed ?? task, number: numbered.number(of: task) ?? 0).trimmingCharacters(in: .whitespaces))"
                )
            }
        }
    }
}

struct Done: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mark a task done.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "Task number or id prefix.") var task: String

    func run() async throws { try await TaskEdit.setCompleted(global, task, true) }
}

struct Undo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mark a task open again.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "Task number or id prefix.") var task: String

    func run() async throws { try await TaskEdit.setCompleted(global, task, false) }
}

extension TaskEdit {
    static func setCompleted(_ global: GlobalOptions, _ reference: String, _ completed: Bool) async throws {
        try await apply(
            global, reference,
            { client, item, etag in
                try await client.update(item.id, TaskPatch(completed: completed), ifMatch: etag).task
            }, verb: completed ? "Done" : "Reopened")
    }
}

struct Rename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Rename a task.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "Task number or id prefix.") var task: String
    @Argument(parsing: .remaining, help: "The new title.") var title: [String]

    func run() async throws {
        let text = title.joined(separator: " ")
        guard TaskLimits.normalizedTitle(text) != nil else {
            Terminal.error("a title needs 1 to \(TaskLimits.titleMaximumLength) characters")
            throw ExitCode.failure
        }
        try await TaskEdit.apply(
            global, task,
            { client, item, etag in
                try await client.update(item.id, TaskPatch(title: text), ifMatch: etag).task
            }, verb: "Renamed")
    }
}

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a task.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "Task number or id prefix.") var task: String

    func run() async throws {
        try await TaskEdit.apply(
            global, task,
            { client, item, etag in
                try await client.delete(item.id, ifMatch: etag)
                return nil
            }, verb: "Deleted")
    }
}

@main
struct Todo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todo",
        abstract: "Your to-do list, signed in through the TodoB2C identity service.",
        subcommands: [
            Login.self, Logout.self, WhoAmI.self, Accounts.self, Switch.self, List.self, Add.self, Done.self, Undo.self, Rename.self,
            Remove.self, Profile.self, PasswordReset.self, Me.self, SignUp.self,
        ])
}
