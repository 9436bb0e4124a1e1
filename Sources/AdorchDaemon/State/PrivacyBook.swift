import AdorchEngine
import AdorchPrivacyStore
import AdorchStateDatabase
import Foundation
import Logging

/// [engine queue] The privacy signals apps set with SetPrivacy (docs/privacy.md, "Setting a
/// viewer's state"), by uid and user id, decoded; and which of them applies to a call. Kept in
/// the state directory, written before the app is answered, read back and decoded again at
/// start. The file is made by the first SetPrivacy: a daemon no app told anything keeps no
/// third database open (its idle footprint).
final class PrivacyBook {
    static let fileName = "privacy.sqlite"
    let path: String
    private var store: PrivacyStore?
    /// By uid, then user id ("" for the app's own record).
    private var records: [UInt32: [String: ViewerPrivacy]] = [:]
    private let logger: Logger

    /// Where the privacy a call has came from (GetPrivacy's `source`, but for `call`).
    enum Source: String, Sendable {
        /// The call's own `privacy` parameter.
        case call
        /// The record the app set for the call's user id.
        case user
        /// The record the app set for itself.
        case app
        /// Nothing: the engine applies the daemon's default.
        case none
    }

    /// Why SetPrivacy changed nothing.
    enum Refusal: Error {
        /// The uid holds `limit` records and this would add one.
        case tooManyRecords(limit: Int)
        /// The file could not take the write (a full disk, an I/O error): why.
        case notStored(String)
    }

    /// Opens the file if there is one and reads it back. One that is damaged (not SQLite,
    /// corrupt, not this store's schema) is moved aside with its WAL, said in the journal, and
    /// the next SetPrivacy starts a new one: apps set their viewers' signals again. Any other
    /// failure touches nothing and is thrown, so the start fails rather than forget them.
    init(stateDir: String, logger: Logger) throws(StateDirectoryError) {
        path = stateDir + "/" + Self.fileName
        self.logger = logger
        guard FileManager.default.fileExists(atPath: path) else { return }
        do {
            store = try PrivacyStore(path: path)
        } catch {
            guard StateDatabase.isDamage(error) else {
                throw StateDirectoryError(path: stateDir, reason: "holds the privacy records apps set, \(Self.fileName), which cannot be opened now: \(error); nothing was changed")
            }
            let outcome = moveAsideDamaged(path).map { "moved to \($0)" } ?? "it could not be moved aside, so SetPrivacy fails until it is"
            logger.error("privacy: \(path) could not be opened (\(error)): \(outcome); the records apps set are forgotten until they set them again")
            return
        }
        restore()
    }

    /// Reads every record back and decodes it. Those that no longer decode (a decoder grew
    /// stricter, or a bound came after them, as `ConsentStringBound.maxGPPSections` did) are
    /// dropped from the file too, in one write however many, and said in one line: how many,
    /// by field, and the first's uid and reason, never a string. Decoding is bounded per
    /// record, so the start takes time in proportion to the file, and a record never stops it.
    private func restore() {
        guard let store else { return }
        let read: (records: [StoredPrivacy], skipped: Int)
        do { read = try store.all() } catch {
            logger.error("privacy: \(path) could not be read (\(error)); the records apps set apply from their next SetPrivacy")
            return
        }
        if read.skipped > 0 { logger.warning("privacy: \(read.skipped) damaged rows in \(path) were not read") }
        var dropped: [(uid: UInt32, userID: String)] = []
        var droppedByField: [String: Int] = [:]
        var first = ""
        func drop(_ row: StoredPrivacy, _ field: PrivacyField, _ reason: String) {
            if dropped.isEmpty { first = "uid \(row.uid)'s record for \(row.userID.isEmpty ? "the app" : "one of its users"): \(field.parameter): \(reason)" }
            dropped.append((row.uid, row.userID))
            droppedByField[field.parameter, default: 0] += 1
        }
        for row in read.records {
            var rating: ContentRating?
            if let name = row.maxContentRating {
                guard let known = ContentRating(rawValue: name) else {
                    drop(row, .maxContentRating, "not one of \(ContentRating.allCases.map(\.rawValue).joined(separator: ", "))")
                    continue
                }
                rating = known
            }
            let signals = PrivacySignals(
                gdprApplies: row.gdprApplies.map { $0 ? .yes : .no } ?? .unknown, tcString: row.tcString, gpp: row.gpp, gppSid: row.gppSid,
                usPrivacy: row.usPrivacy, childDirected: row.childDirected, underAgeOfConsent: row.underAgeOfConsent,
                nonPersonalized: row.nonPersonalized, maxContentRating: rating)
            do {
                records[row.uid, default: [:]][row.userID] = try ViewerPrivacy.decoding(signals)
            } catch {
                drop(row, error.field, error.reason)
            }
        }
        let kept = "\(records.values.reduce(0) { $0 + $1.count }) records of \(records.count) uids read back from \(path)"
        guard !dropped.isEmpty else {
            if !records.isEmpty { logger.info("privacy: \(kept)") }
            return
        }
        let removed: String
        do {
            try store.clear(dropped)
            removed = "from the file too"
        } catch {
            removed = "here, but the file could not take their deletion (\(error)), so they are read and dropped again at the next start"
        }
        let fields = droppedByField.sorted { $0.key < $1.key }.map { "\($0.value) by \($0.key)" }.joined(separator: ", ")
        logger.warning("privacy: \(kept); \(dropped.count) dropped \(removed), as they no longer decode (\(fields)); the first, \(first)")
    }

    /// Which privacy applies to a call of `uid` for `userID`, given the call's own, defined
    /// here once: the call's; else the record for (uid, userID); else the uid's own record;
    /// else none, and the engine applies the daemon's default.
    func resolve(call: ViewerPrivacy?, uid: UInt32?, userID: String?) -> (privacy: ViewerPrivacy?, source: Source) {
        if let call { return (call, .call) }
        guard let uid, let own = records[uid] else { return (nil, .none) }
        if let userID, !userID.isEmpty, let user = own[userID] { return (user, .user) }
        if let app = own[""] { return (app, .app) }
        return (nil, .none)
    }

    /// Sets (or, `privacy` nil, clears) the record of `uid` for `userID` ("" for the app's
    /// own): on disk first, then here, so a refusal or a failure changes nothing.
    func set(_ privacy: ViewerPrivacy?, uid: UInt32, userID: String, limit: Int) throws(Refusal) {
        guard let privacy else {
            guard records[uid]?[userID] != nil, let store else { return }
            do { try store.clear(uid: uid, userID: userID) } catch { throw .notStored("\(error)") }
            records[uid]?[userID] = nil
            if records[uid]?.isEmpty == true { records[uid] = nil }
            return
        }
        let s = privacy.signals
        let row = StoredPrivacy(uid: uid, userID: userID, gdprApplies: s.gdprApplies == .unknown ? nil : s.gdprApplies == .yes,
                                tcString: s.tcString, gpp: s.gpp, gppSid: s.gppSid, usPrivacy: s.usPrivacy, childDirected: s.childDirected,
                                underAgeOfConsent: s.underAgeOfConsent, nonPersonalized: s.nonPersonalized,
                                maxContentRating: s.maxContentRating?.rawValue)
        do {
            if store == nil { store = try PrivacyStore(path: path) }
            try store?.set(row, limit: limit)
        } catch let refusal as PrivacyStore.TooManyRecords {
            throw .tooManyRecords(limit: refusal.limit)
        } catch {
            throw .notStored("\(error)")
        }
        records[uid, default: [:]][userID] = privacy
    }

    /// Merges the WAL into the file, for a clean stop: the state directory then holds one file.
    func checkpoint() {
        do { try store?.checkpoint() } catch { logger.warning("privacy: \(path) could not be checkpointed at stop: \(error)") }
    }
}
