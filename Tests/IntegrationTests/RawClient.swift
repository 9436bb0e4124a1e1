import Foundation

/// A raw connection, for misbehaving on purpose.
final class RawClient {
    let fd: Int32
    init(_ path: String, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw TestFailure("connect: \(String(cString: strerror(errno)))") }
    }
    deinit { close(fd) }

    func send(_ text: String, nul: Bool = true) {
        let bytes = Array(text.utf8) + (nul ? [0] : [])
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything until the daemon closes the connection (or 10 s pass).
    func readToEnd() -> String {
        var all = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            all += chunk[0..<n]
        }
        return String(decoding: all.map { $0 == 0 ? UInt8(ascii: "\n") : $0 }, as: UTF8.self)
    }

    /// One message (up to its NUL).
    func readMessage() -> String {
        var all = [UInt8]()
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1, byte != 0 { all.append(byte) }
        return String(decoding: all, as: UTF8.self)
    }
}
