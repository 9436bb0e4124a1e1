import AdorchVarlink
import CAdorchMallocCount
import Foundation

/// The Varlink server's own cost per message, without sockets: decoding a typical Show call
/// and encoding a typical Show reply, the way it was done through Foundation's Codable
/// (JSONDecoder, JSONEncoder) against the hand-written parser and writer.
public struct WireBenchmark {
    /// Messages timed per row (after a warm-up of a tenth as many).
    public var iterations: Int

    public init(iterations: Int = 200_000) { self.iterations = iterations }

    /// What the load generator sends.
    static let showCall = Data(#"{"method":"io.adorch.Ads.Show","parameters":{"slot":"s0","user_id":"user-42"}}"#.utf8)

    /// The ad the sim plugin fills an interstitial slot with, as Show returns it.
    static let showReply: [String: JSONValue] = [
        "ad": [
            "id": "ad-7f3e2a91c4d84b0e", "slot": "s0", "network": "sim", "format": "interstitial",
            "expires_at": "2026-05-04T12:34:56.789Z", "price": 1.5,
            "payload": [
                "network": "sim", "network_ad_id": "sim-1-000417263", "format": "interstitial",
                "title": "Simulated ad 000417263", "media_url": "https://sim.invalid/media/000417263.mp4",
                "duration_s": 15, "expires_in_s": 3600, "price": 1.5, "tracks_impressions": false,
                "reward_by": "host", "test": true,
            ],
        ],
    ]

    public func run() -> BenchSection {
        let rows = [
            measure("decode Show call", "Foundation (JSONDecoder, Codable)") { Self.foundationDecode(Self.showCall) },
            measure("decode Show call", "adorch (JSONParser)") {
                Self.showCall.withUnsafeBytes { if case .success = VarlinkCall.decode(bytes: $0) { 1 } else { 0 } }
            },
            measure("encode Show reply", "Foundation (JSONEncoder, Codable)") { Self.foundationEncode(Self.showReply) },
            measure("encode Show reply", "adorch (JSONWriter)") { VarlinkWire.reply(Self.showReply, continues: false).count },
        ]
        let counting = rows.contains { $0.allocations > 0 }
        var text = "Each message \(iterations) times on one thread, in process: the JSON work of one call, no sockets.\n\n"
        text += "| message | code | ns/message | allocations/message |\n|---|---|---:|---:|\n"
        for row in rows {
            let allocations = counting ? String(format: "%.1f", row.allocations) : "n/a"
            text += "| \(row.message) | \(row.code) | \(String(format: "%.0f", row.nanoseconds)) | \(allocations) |\n"
        }
        let decodeSpeedup = rows[0].nanoseconds / rows[1].nanoseconds
        let encodeSpeedup = rows[2].nanoseconds / rows[3].nanoseconds
        text += String(format: "\nDecoding is %.1f× and encoding %.1f× as fast as through Foundation.", decodeSpeedup, encodeSpeedup)
        if !counting { text += " Allocations are not counted in a sanitizer build." }
        text += "\n"
        return BenchSection(title: "6. The wire", text: text, targets: [], measures: [
            "decode_foundation_ns": rows[0].nanoseconds, "decode_ns": rows[1].nanoseconds,
            "encode_foundation_ns": rows[2].nanoseconds, "encode_ns": rows[3].nanoseconds,
        ])
    }

    private struct Row {
        var message: String
        var code: String
        var nanoseconds: Double
        var allocations: Double
    }

    private func measure(_ message: String, _ code: String, _ body: () -> Int) -> Row {
        var sink = 0
        for _ in 0..<max(iterations / 10, 1) { sink &+= body() }
        let clock = ContinuousClock()
        let mallocsBefore = adorch_malloc_count()
        let elapsed = clock.measure { for _ in 0..<iterations { sink &+= body() } }
        let mallocs = adorch_malloc_count() - mallocsBefore
        // Keeps the work from being optimised away.
        if sink == .min { print(sink) }
        return Row(message: message, code: code, nanoseconds: Double(elapsed / .nanoseconds(1)) / Double(iterations),
                   allocations: Double(mallocs) / Double(iterations))
    }

    /// The call decoding of before: the whole message to a JSONValue through Codable, then its members picked.
    static func foundationDecode(_ data: Data) -> Int {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: data),
              case .string(let method)? = object["method"], case .object(let parameters)? = object["parameters"]
        else { return 0 }
        var flags = 0
        for flag in ["oneway", "more", "upgrade"] where object[flag]?.boolValue == true { flags += 1 }
        return method.utf8.count + parameters.count + flags
    }

    /// The reply encoding of before: the message as an object, through JSONEncoder, and its NUL.
    static func foundationEncode(_ parameters: [String: JSONValue]) -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = (try? encoder.encode(JSONValue.object(["parameters": .object(parameters)]))) ?? Data("null".utf8)
        data.append(0)
        return data.count
    }
}
