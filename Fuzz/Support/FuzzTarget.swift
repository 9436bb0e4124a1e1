import CFuzzDriver
import Foundation

/// The one entry point of a fuzz target's binary.
///
/// Built with `-sanitize=fuzzer -DFUZZING` (make fuzz) it is libFuzzer, with libFuzzer's
/// options and corpus arguments. Built plainly (`swift build`, the tests) it runs each input
/// file, or every file under each folder, given on the command line through the target once:
/// the committed corpus stays a regression test, and a crash input libFuzzer saved can be
/// replayed under a debugger.
public enum FuzzTarget {
    public static func main(_ target: @escaping (Data) -> Void) {
        #if FUZZING
        current = target
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { bytes, count in
            FuzzTarget.current?(bytes.map { Data(bytes: $0, count: count) } ?? Data())
            return 0
        })
        #else
        replay(target)
        #endif
    }

    /// libFuzzer calls back through a C function pointer, which cannot capture the target.
    nonisolated(unsafe) private static var current: ((Data) -> Void)?

    private static func replay(_ target: (Data) -> Void) {
        var inputs = 0
        for argument in CommandLine.arguments.dropFirst() {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isFolder) else {
                FileHandle.standardError.write(Data("no such file or folder: \(argument)\n".utf8))
                exit(2)
            }
            let files = isFolder.boolValue
                ? ((FileManager.default.enumerator(atPath: argument)?.allObjects as? [String]) ?? []).sorted().map { "\(argument)/\($0)" }
                : [argument]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }  // a folder
                target(data)
                inputs += 1
            }
        }
        print("\(inputs) inputs replayed, none crashed")
    }
}
