import Foundation
import XCTest

/// ../shared/data/openrtb beside the package: IAB's schema and examples, read where they lie.
enum SharedOpenRTB {
    static let packageFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let folder = packageFolder.appendingPathComponent("../shared/data/openrtb").standardizedFileURL

    /// A file of the shared folder, or an XCTSkip saying where it was looked for.
    static func data(_ path: String) throws -> Data {
        let url = folder.appendingPathComponent(path)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw XCTSkip("the OpenRTB schema and examples are in the shared folder beside the package, and \(url.path) is absent")
        }
        return data
    }

    static var schemaFolder: String { folder.appendingPathComponent("schema").path }

    /// python3 with its arguments: exit status, stdout, stderr.
    static func python(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let (out, err) = (Pipe(), Pipe())
        (process.standardOutput, process.standardError) = (out, err)
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let error = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: error, as: UTF8.self))
    }
}
