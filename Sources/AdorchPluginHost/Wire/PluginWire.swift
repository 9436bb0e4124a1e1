import AdorchEngine
import AdorchPrivacy
import Foundation
import Logging

/// What the daemon and an isolated plugin's host (adorch-plugin-host) say to each other over
/// their socketpair: the plugin's calls one way, its callbacks and the answers the other.
/// docs/isolation.md describes the exchange; this is its one definition.
///
/// Each message is a frame: a 4-byte little-endian length, then the body, whose first byte
/// is the message's tag. Numbers are little-endian, strings a 4-byte length and UTF-8, an
/// optional a 0/1 byte before its value. Both ends are built from this file, so there is no
/// version to negotiate: a host from another build is refused at its hello.
public enum PluginWire {
    /// The largest frame either side accepts: a payload over this is the plugin's fault.
    public static let maxFrame = 16 << 20
    /// Sent first by the host, so that a stray binary on the other end is not taken for one.
    public static let magic: UInt32 = 0xAD0C_4801

    /// Daemon → host.
    public enum Call: Sendable, Equatable {
        /// The first call: open the plugin, check its file, call its init. `logLevel` is the
        /// daemon's: lines below it are not sent, nor counted against the plugin's rate.
        case start(name: String, path: String, configJSON: String, insecurePlugins: Bool, logLevel: String)
        case load(LoadOrder)
        /// `seq` pairs the answer with the call.
        case show(seq: UInt64, ad: AdID, userID: String?)
        case withdrawShow(AdID)
        case notify(AdID, ViewerEvent)
        case control(AdID, SessionControl)
        case lose(AdID, AuctionLoss)
        case destroy(AdID)
        case stats(seq: UInt64)
        /// Answered from the plugin's queue: a host whose plugin is stuck in a call does not answer.
        case ping(seq: UInt64)
        /// Destroy what is left, deinit, exit.
        case shutdown
    }

    /// Host → daemon.
    public enum Reply: Sendable, Equatable {
        case hello(magic: UInt32, pid: Int32)
        /// The plugin's init returned 0: its description.
        case started(PluginInfo)
        /// The file or its init was refused: the reason, as the in-process loader says it.
        case refused(String)
        case report(AdID, PluginReport)
        case shown(seq: UInt64, Bool)
        case stats(seq: UInt64, String?)
        case pong(seq: UInt64)
        /// A line for the daemon's log: a swift-log level's raw value and the text.
        case log(level: String, message: String)
        /// The confinement applied, and what the kernel refused (said once, at start).
        case confined(String)
        case shutDown
    }

    public struct Malformed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Each message's first byte: named here once, for the encoder and the decoder.
    enum CallTag: UInt8 { case start = 1, load, show, withdrawShow, notify, control, destroy, stats, ping, shutdown, lose }
    enum ReplyTag: UInt8 { case hello = 1, started, refused, report, shown, stats, pong, log, confined, shutDown }
    /// A report's byte after its ad id.
    enum ReportTag: UInt8 { case loaded = 1, loadedInvalid, failed, mediaCached, other, reward, destroyed }
}

// MARK: Encoding

/// Builds one frame.
struct WireWriter {
    private(set) var bytes: [UInt8] = [0, 0, 0, 0]

    init(call tag: PluginWire.CallTag) { bytes.append(tag.rawValue) }
    init(reply tag: PluginWire.ReplyTag) { bytes.append(tag.rawValue) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func tag(_ v: PluginWire.ReportTag) { u8(v.rawValue) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func i32(_ v: Int32) { u32(UInt32(bitPattern: v)) }
    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    mutating func bool(_ v: Bool) { u8(v ? 1 : 0) }
    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
    mutating func optional<T>(_ v: T?, _ write: (inout WireWriter, T) -> Void) {
        bool(v != nil)
        if let v { write(&self, v) }
    }

    /// The frame, its length filled in.
    mutating func frame() -> [UInt8] {
        let length = UInt32(bytes.count - 4).littleEndian
        withUnsafeBytes(of: length) { for i in 0..<4 { bytes[i] = $0[i] } }
        return bytes
    }
}

/// Reads one frame's body; every read checks its bounds.
struct WireReader {
    private let body: ArraySlice<UInt8>
    private var at: Int

    init(_ body: ArraySlice<UInt8>) {
        self.body = body
        at = body.startIndex
    }

    fileprivate mutating func take(_ n: Int) throws(PluginWire.Malformed) -> ArraySlice<UInt8> {
        guard n >= 0, body.endIndex - at >= n else { throw PluginWire.Malformed(description: "a frame ends early") }
        defer { at += n }
        return body[at..<(at + n)]
    }

    mutating func u8() throws(PluginWire.Malformed) -> UInt8 { try take(1).first! }
    mutating func u32() throws(PluginWire.Malformed) -> UInt32 {
        try take(4).reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
    mutating func u64() throws(PluginWire.Malformed) -> UInt64 {
        try take(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
    mutating func i32() throws(PluginWire.Malformed) -> Int32 { Int32(bitPattern: try u32()) }
    mutating func i64() throws(PluginWire.Malformed) -> Int64 { Int64(bitPattern: try u64()) }
    mutating func bool() throws(PluginWire.Malformed) -> Bool { try u8() != 0 }
    mutating func string() throws(PluginWire.Malformed) -> String {
        let count = Int(try u32())
        return String(decoding: try take(count), as: UTF8.self)
    }
    mutating func optional<T>(_ read: (inout WireReader) throws(PluginWire.Malformed) -> T) throws(PluginWire.Malformed) -> T? {
        try bool() ? try read(&self) : nil
    }
    func end() throws(PluginWire.Malformed) {
        guard at == body.endIndex else { throw PluginWire.Malformed(description: "a frame has \(body.endIndex - at) bytes too many") }
    }
    mutating func named<T: RawRepresentable>(_: T.Type, _ what: String) throws(PluginWire.Malformed) -> T where T.RawValue == String {
        let name = try string()
        guard let value = T(rawValue: name) else { throw PluginWire.Malformed(description: "unknown \(what) \"\(name)\"") }
        return value
    }
}

// MARK: A load's privacy

extension WireWriter {
    /// A load's privacy class and signals (LoadPrivacy), as WireReader.privacy reads them.
    mutating func privacy(_ p: LoadPrivacy) {
        string(p.privacyClass.rawValue)
        switch p.signals.gdprApplies {
        case .yes: i32(1)
        case .no: i32(0)
        case .unknown: i32(-1)
        }
        optional(p.signals.tcString) { $0.string($1) }
        optional(p.signals.gpp) { $0.string($1) }
        u32(UInt32(p.signals.gppSid.count))
        for id in p.signals.gppSid { i64(Int64(id)) }
        optional(p.signals.usPrivacy) { $0.string($1) }
        bool(p.signals.childDirected); bool(p.signals.underAgeOfConsent); bool(p.signals.nonPersonalized)
        optional(p.signals.maxContentRating) { $0.string($1.rawValue) }
    }
}

extension WireReader {
    /// A load's privacy. The daemon sends only strings it decoded within
    /// ConsentStringBound.maxBytes; a frame with a longer one, or a value no signal has, is
    /// refused naming the field (plugin.h's adorch_privacy), before anything is allocated for it.
    mutating func privacy() throws(PluginWire.Malformed) -> LoadPrivacy {
        let privacyClass = try named(PrivacyClass.self, "privacy class")
        let gdpr: GDPRApplies
        switch try i32() {
        case 1: gdpr = .yes
        case 0: gdpr = .no
        case -1: gdpr = .unknown
        case let other: throw PluginWire.Malformed(description: "privacy.gdpr: \(other) is not 1, 0 or -1")
        }
        let tcString = try optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.consentString("privacy.tc_string") }
        let gpp = try optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.consentString("privacy.gpp") }
        let count = Int(try u32())
        // The daemon sends only a gpp_sid it checked against the GPP string's sections.
        guard count <= ConsentStringBound.maxGPPSections else {
            throw PluginWire.Malformed(description: "privacy.gpp_sid: \(count) ids, over the \(ConsentStringBound.maxGPPSections) sections a GPP string may carry")
        }
        var sids: [Int] = []
        for index in 0..<count {
            let id = try i64()
            guard (1...Int64(ConsentStringBound.maxGPPSectionID)).contains(id) else {
                throw PluginWire.Malformed(description: "privacy.gpp_sid[\(index)]: \(id) is not a GPP section id")
            }
            sids.append(Int(id))
        }
        let usPrivacy = try optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.consentString("privacy.us_privacy") }
        let signals = PrivacySignals(gdprApplies: gdpr, tcString: tcString, gpp: gpp, gppSid: sids, usPrivacy: usPrivacy,
                                     childDirected: try bool(), underAgeOfConsent: try bool(), nonPersonalized: try bool(),
                                     maxContentRating: try optional { (r: inout WireReader) throws(PluginWire.Malformed) in
                                         try r.named(ContentRating.self, "privacy.max_content_rating")
                                     })
        return LoadPrivacy(privacyClass: privacyClass, signals: signals)
    }

    /// A consent string, its length checked against ConsentStringBound.maxBytes before its bytes are read.
    private mutating func consentString(_ field: String) throws(PluginWire.Malformed) -> String {
        let count = Int(try u32())
        guard count <= ConsentStringBound.maxBytes else {
            throw PluginWire.Malformed(description: "\(field): \(count) bytes, over the \(ConsentStringBound.maxBytes) a consent string may have")
        }
        return String(decoding: try take(count), as: UTF8.self)
    }
}

extension PluginWire.Call {
    public var frame: [UInt8] {
        switch self {
        case .start(let name, let path, let config, let insecure, let level):
            var w = WireWriter(call: .start)
            w.string(name); w.string(path); w.string(config); w.bool(insecure); w.string(level)
            return w.frame()
        case .load(let o):
            var w = WireWriter(call: .load)
            w.u64(o.adID); w.string(o.plugin); w.string(o.slotID); w.string(o.format.rawValue)
            w.string(o.entry.plugin); w.string(o.entry.adUnitID); w.string(o.entry.serverParameter)
            w.i64(o.entry.timeout.nanosecondsClamped); w.u64(o.deadline.nanoseconds)
            w.optional(o.reward) { w, r in w.string(r.name); w.i64(r.amount); w.string(r.extra) }
            w.bool(o.testMode); w.string(o.targetingJSON)
            w.i64(Int64(o.count)); w.i64(Int64(o.width)); w.i64(Int64(o.height))
            w.string(o.variant); w.string(o.imageOptionsJSON)
            w.optional(o.interactive) { w, i in w.string(i.creativeURL); w.string(i.adParametersJSON); w.string(i.slotType.rawValue) }
            w.privacy(o.privacy)
            w.u64(o.floor.bitPattern)
            return w.frame()
        case .show(let seq, let ad, let user):
            var w = WireWriter(call: .show)
            w.u64(seq); w.u64(ad); w.optional(user) { $0.string($1) }
            return w.frame()
        case .withdrawShow(let ad):
            var w = WireWriter(call: .withdrawShow)
            w.u64(ad)
            return w.frame()
        case .notify(let ad, let event):
            var w = WireWriter(call: .notify)
            w.u64(ad); w.string(event.rawValue)
            return w.frame()
        case .control(let ad, let control):
            var w = WireWriter(call: .control)
            w.u64(ad); w.string(control.rawValue)
            return w.frame()
        case .lose(let ad, let loss):
            var w = WireWriter(call: .lose)
            w.u64(ad); w.u64(UInt64(loss.abi.rawValue))
            return w.frame()
        case .destroy(let ad):
            var w = WireWriter(call: .destroy)
            w.u64(ad)
            return w.frame()
        case .stats(let seq):
            var w = WireWriter(call: .stats)
            w.u64(seq)
            return w.frame()
        case .ping(let seq):
            var w = WireWriter(call: .ping)
            w.u64(seq)
            return w.frame()
        case .shutdown:
            var w = WireWriter(call: .shutdown)
            return w.frame()
        }
    }

    public init(body: ArraySlice<UInt8>) throws(PluginWire.Malformed) {
        var r = WireReader(body)
        switch PluginWire.CallTag(rawValue: try r.u8()) {
        case .start?:
            self = .start(name: try r.string(), path: try r.string(), configJSON: try r.string(), insecurePlugins: try r.bool(),
                          logLevel: try r.named(Logger.Level.self, "log level").rawValue)
        case .load?:
            let id = try r.u64(), plugin = try r.string(), slot = try r.string(), format = try r.named(AdFormat.self, "format")
            let entry = WaterfallEntry(plugin: try r.string(), adUnitID: try r.string(), serverParameter: try r.string(),
                                       timeout: .nanoseconds(try r.i64()))
            let deadline = Moment(nanoseconds: try r.u64())
            let reward = try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in
                RewardModel(name: try r.string(), amount: try r.i64(), extra: try r.string())
            }
            var order = LoadOrder(adID: id, plugin: plugin, slotID: slot, format: format, entry: entry, deadline: deadline,
                                  reward: reward, testMode: try r.bool(), targetingJSON: try r.string())
            order.count = Int(try r.i64()); order.width = Int(try r.i64()); order.height = Int(try r.i64())
            order.variant = try r.string(); order.imageOptionsJSON = try r.string()
            order.interactive = try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in
                InteractiveRequest(creativeURL: try r.string(), adParametersJSON: try r.string(),
                                   slotType: try r.named(InteractiveRequest.SlotType.self, "slot type"))
            }
            order.privacy = try r.privacy()
            order.floor = Double(bitPattern: try r.u64())
            self = .load(order)
        case .show?: self = .show(seq: try r.u64(), ad: try r.u64(), userID: try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.string() })
        case .withdrawShow?: self = .withdrawShow(try r.u64())
        case .notify?: self = .notify(try r.u64(), try r.named(ViewerEvent.self, "event"))
        case .control?: self = .control(try r.u64(), try r.named(SessionControl.self, "control"))
        case .lose?:
            let ad = try r.u64()
            guard let loss = AuctionLoss(abiValue: try r.u64()) else { throw PluginWire.Malformed(description: "unknown loss reason") }
            self = .lose(ad, loss)
        case .destroy?: self = .destroy(try r.u64())
        case .stats?: self = .stats(seq: try r.u64())
        case .ping?: self = .ping(seq: try r.u64())
        case .shutdown?: self = .shutdown
        case nil: throw PluginWire.Malformed(description: "unknown call tag \(body.first.map(String.init) ?? "")")
        }
        try r.end()
    }
}

extension PluginWire.Reply {
    public var frame: [UInt8] {
        switch self {
        case .hello(let magic, let pid):
            var w = WireWriter(reply: .hello)
            w.u32(magic); w.i32(pid)
            return w.frame()
        case .started(let info):
            var w = WireWriter(reply: .started)
            w.string(info.name); w.string(info.path); w.string(info.declaredName); w.string(info.version); w.string(info.description)
            w.u32(info.abiMajor); w.u32(info.abiMinor)
            w.u32(UInt32(info.formats.count))
            for format in info.formats { w.string(format.rawValue) }
            return w.frame()
        case .refused(let reason):
            var w = WireWriter(reply: .refused)
            w.string(reason)
            return w.frame()
        case .report(let ad, let report):
            var w = WireWriter(reply: .report)
            w.u64(ad)
            switch report {
            // The plugin's own text: the daemon decodes it as an in-process load's is decoded.
            case .loaded(let payload, _, _, _, _, _, _): w.tag(.loaded); w.string(payload)
            case .loadedInvalid(let reason): w.tag(.loadedInvalid); w.string(reason)
            case .failed(let code, let networkCode, let message): w.tag(.failed); w.string(code.rawValue); w.i64(networkCode); w.string(message)
            case .mediaCached: w.tag(.mediaCached)
            case .other(let name, let detail): w.tag(.other); w.string(name); w.optional(detail) { $0.string($1) }
            case .reward(let transID): w.tag(.reward); w.optional(transID) { $0.string($1) }
            case .destroyed: w.tag(.destroyed)
            }
            return w.frame()
        case .shown(let seq, let shown):
            var w = WireWriter(reply: .shown)
            w.u64(seq); w.bool(shown)
            return w.frame()
        case .stats(let seq, let text):
            var w = WireWriter(reply: .stats)
            w.u64(seq); w.optional(text) { $0.string($1) }
            return w.frame()
        case .pong(let seq):
            var w = WireWriter(reply: .pong)
            w.u64(seq)
            return w.frame()
        case .log(let level, let message):
            var w = WireWriter(reply: .log)
            w.string(level); w.string(message)
            return w.frame()
        case .confined(let text):
            var w = WireWriter(reply: .confined)
            w.string(text)
            return w.frame()
        case .shutDown:
            var w = WireWriter(reply: .shutDown)
            return w.frame()
        }
    }

    public init(body: ArraySlice<UInt8>) throws(PluginWire.Malformed) {
        var r = WireReader(body)
        switch PluginWire.ReplyTag(rawValue: try r.u8()) {
        case .hello?: self = .hello(magic: try r.u32(), pid: try r.i32())
        case .started?:
            let name = try r.string(), path = try r.string(), declared = try r.string(), version = try r.string(), text = try r.string()
            let major = try r.u32(), minor = try r.u32()
            let count = Int(try r.u32())
            guard count <= AdFormat.allCases.count else { throw PluginWire.Malformed(description: "\(count) formats") }
            var formats: [AdFormat] = []
            for _ in 0..<count { formats.append(try r.named(AdFormat.self, "format")) }
            self = .started(PluginInfo(name: name, path: path, declaredName: declared, version: version, description: text,
                                       abiMajor: major, abiMinor: minor, formats: formats))
        case .refused?: self = .refused(try r.string())
        case .report?:
            let ad = try r.u64()
            let report: PluginReport
            let kind = try r.u8()
            switch PluginWire.ReportTag(rawValue: kind) {
            case .loaded?: report = decodePayload(try r.string())
            case .loadedInvalid?: report = .loadedInvalid(reason: try r.string())
            case .failed?: report = .failed(try r.named(AdErrorCode.self, "error code"), networkCode: try r.i64(), message: try r.string())
            case .mediaCached?: report = .mediaCached
            case .other?: report = .other(name: try r.string(), detailJSON: try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.string() })
            case .reward?: report = .reward(transID: try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.string() })
            case .destroyed?: report = .destroyed
            case nil: throw PluginWire.Malformed(description: "unknown report kind \(kind)")
            }
            self = .report(ad, report)
        case .shown?: self = .shown(seq: try r.u64(), try r.bool())
        case .stats?: self = .stats(seq: try r.u64(), try r.optional { (r: inout WireReader) throws(PluginWire.Malformed) in try r.string() })
        case .pong?: self = .pong(seq: try r.u64())
        case .log?: self = .log(level: try r.string(), message: try r.string())
        case .confined?: self = .confined(try r.string())
        case .shutDown?: self = .shutDown
        case nil: throw PluginWire.Malformed(description: "unknown reply tag \(body.first.map(String.init) ?? "")")
        }
        try r.end()
    }
}
