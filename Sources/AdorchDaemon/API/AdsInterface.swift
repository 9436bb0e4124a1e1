import AdorchEngine
import AdorchVarlink

/// The scheduler's view of a slot's demand: one type, in both interfaces (Varlink types do
/// not cross interfaces).
let demandTypeIDL = """
# How the scheduler sizes a preloaded slot's buffer.
type Demand (
  # Shows per minute planned for: the higher of the two rates below
  per_minute: float,
  # over the shortest of 10 min, 1 h and 6 h windows that has seen 8 Shows (docs/scheduler.md)
  long_per_minute: float,
  # over the last few Shows: a burst shows here first
  short_per_minute: float,
  # expected seconds from a refill's start to a loaded ad, through the waterfall
  refill_s: float,
  # expected seconds a loaded ad stays valid
  ad_lifetime_s: float,
  # why the buffer is what it is, e.g. "burst: 9.5/min over the last 4 Shows"
  reason: string
)
"""

/// io.adorch.Ads: what apps call. The names are fixed: outside tools call them.
enum AdsMethod: String, VarlinkMethodName {
    case listSlots = "ListSlots"
    case show = "Show"
    case listRewards = "ListRewards"
    case ackReward = "AckReward"
    case load = "Load"
    case report = "Report"
    case initInteractive = "InitInteractive"
    case start = "Start"
    case pause = "Pause"
    case resume = "Resume"
    case stop = "Stop"
    case listEvents = "ListEvents"
    case subscribe = "Subscribe"
    case setPrivacy = "SetPrivacy"
    case getPrivacy = "GetPrivacy"

    static let interface = "io.adorch.Ads"

    var declaration: VarlinkDeclaration {
        switch self {
        case .listSlots: VarlinkDeclaration(
            """
            # The slots and how many ads each has ready, and for each the caller may use whether a
            # frequency rule holds a Show of the caller's for user_id (without one: for a Show without
            # one) and until when. A user id is the calling app's own: other apps' users are apart.
            """,
            """
            (
              # at most \(FieldBounds.userID) bytes
              user_id: ?string
            ) -> (slots: []Slot)
            """)
        case .show: VarlinkDeclaration(
            """
            # Takes the best valid ad of a slot (highest price, then earliest expiry) and has its plugin
            # present it; if the plugin cannot (failed_to_display), the next valid ad is taken in the
            # same call. A rewarded slot needs a non-empty user_id; reward overrides the slot's model.
            # A Show that a frequency rule would break answers Capped and changes nothing (docs/caps.md).
            """,
            """
            (
              slot: string,
              # at most \(FieldBounds.userID) bytes
              user_id: ?string,
              reward: ?RewardModel,
              # for this call only: over what SetPrivacy set for user_id and for the app
              privacy: ?Privacy
            ) -> (ad: Ad)
            """)
        case .listRewards: VarlinkDeclaration(
            """
            # Rewards granted but not acknowledged, oldest first: those of the ads handed to the caller's
            # uid; root and the Manager users get everyone's. A page of at most limit (default
            # \(RewardDesk.listedByDefault), at most \(RewardDesk.listedAtMost)); more: others follow, so call again with after = the
            # trans_id of the page's last reward.
            """,
            """
            (
              # at most \(FieldBounds.userID) bytes
              user_id: ?string,
              # RFC 3339: only rewards granted then or later
              since: ?string,
              # a trans_id: only rewards after it (by time granted, then trans_id)
              after: ?string,
              limit: ?int
            ) -> (rewards: []Reward, more: bool)
            """)
        case .ackReward: VarlinkDeclaration("# The app has delivered this reward: it is not offered again.", "(trans_id: string) -> ()")
        case .load: VarlinkDeclaration(
            """
            # Loads ads of an on-demand slot (banner, splash, native) now, trying the slot's waterfall in
            # order within timeout_ms (default: the slot's; splash 2000). The ads returned are handed to
            # the caller (shown); native loads 1 to 10 at once (count, default the slot's, 3 recommended).
            # targeting: app_id, gender (male, female, unknown), age, keywords, extra (object),
            # paid_app, test_mode; its keys override the slot's and the daemon's for this request.
            """,
            """
            (
              slot: string,
              count: ?int,
              width: ?int,
              height: ?int,
              timeout_ms: ?int,
              # at most \(FieldBounds.targeting) bytes as compact JSON
              targeting: ?object,
              # for this call only: over what SetPrivacy set for the app
              privacy: ?Privacy
            ) -> (ads: []Ad)
            """)
        case .report: VarlinkDeclaration(
            """
            # Reports what the viewer did with a shown ad: impression, click, close, complete, skip, and
            # the video's progress: start, first_quartile, midpoint, third_quartile.
            # Each but click is accepted once per ad; close ends the ad.
            """,
            "(ad_id: string, event: string) -> ()")
        case .initInteractive: VarlinkDeclaration(
            """
            # A fresh session in an interactive slot; it starts fetching at once, so call it before the
            # break (preloading) and Start at the break. creative_url and ad_parameters are what the
            # app's ad response gave for the interactive ad.
            """,
            """
            (
              slot: string,
              # an absolute http or https URL of at most \(FieldBounds.creativeURL) bytes
              creative_url: string,
              # at most \(FieldBounds.adParameters) bytes as compact JSON
              ad_parameters: object,
              slot_type: SlotType
            ) -> (session_id: string)
            """)
        case .start: VarlinkDeclaration(
            """
            # Shows the session's unit as soon as its fetch is complete. If no started event comes within
            # the slot's start_timeout_ms, the daemon stops the session with a terminal error.
            """,
            "(session_id: string) -> ()")
        case .pause: VarlinkDeclaration("# Pauses the unit's video, audio and timers (the app went to the background, a popup opened).", "(session_id: string) -> ()")
        case .resume: VarlinkDeclaration("# Resumes a paused unit.", "(session_id: string) -> ()")
        case .stop: VarlinkDeclaration("# Ends the session at once (its last event is stopped); the id is never valid again.", "(session_id: string) -> ()")
        case .listEvents: VarlinkDeclaration(
            """
            # The latest events, oldest first, of the named slots or of all, that the caller may see (Event): those
            # about ads or sessions its uid holds (handed by Show or Load, loading for its Load, its InitInteractive),
            # and those about no app's ads in the slots it may use; never another uid's (docs/rules.md, "Who sees what").
            # At most \(EventFeed.recentKept) are kept in all, shared among the slots: when full, the slot holding the
            # most loses its oldest, so a flood in one slot pushes out only its own events and every slot keeps its
            # latest, up to its share (\(EventFeed.recentKept) over the slots with events kept).
            """,
            "(slots: ?[]string, limit: ?int) -> (events: []Event)")
        case .subscribe: VarlinkDeclaration(
            """
            # Streams events (call with more): first one of kind "subscribed", then the newest
            # \(RewardDesk.redeliveredAtMost) unacknowledged rewards the caller may see, oldest of them first (the subscribed
            # event's rewards_waiting says how many more there are: page them with ListRewards), then one
            # per event of the named slots, or of all slots when none are named, that the caller may see (Event),
            # by the rule of ListEvents: an event about another uid's ad or session never comes.
            """,
            "(slots: ?[]string) -> (event: Event)")
        case .setPrivacy: VarlinkDeclaration(
            """
            # Sets what the caller's viewers said about their privacy (docs/privacy.md, "Setting a viewer's state"):
            # with user_id, for that user of the app; without (or ""), for the app as a whole. null privacy clears
            # it. Show and Load then take, for the caller: their own privacy if given, else the user's, else the
            # app's, else the daemon's default. Each string is decoded first: one that does not decode is refused,
            # InvalidParameter naming it, and nothing changes. Kept in the state directory, on disk before the reply,
            # at most [limits] \(Budget.privacyRecords.key) records per uid. An app reads and changes only its own uid's.
            """,
            """
            (
              # at most \(FieldBounds.userID) bytes
              user_id: ?string,
              privacy: ?Privacy
            ) -> ()
            """)
        case .getPrivacy: VarlinkDeclaration(
            """
            # What applies to the caller's calls for user_id (without one: for calls without one), as SetPrivacy set it.
            """,
            """
            (
              # at most \(FieldBounds.userID) bytes
              user_id: ?string
            ) -> (
              privacy: ?Privacy,
              # user: the record for user_id; app: the app's record; none: neither (the daemon's default applies)
              source: string
            )
            """)
        }
    }
}

enum AdsError: String, VarlinkErrorName {
    case noAdReady = "NoAdReady"
    case slotNotFound = "SlotNotFound"
    case capped = "Capped"
    case adNotValid = "AdNotValid"
    case sessionNotFound = "SessionNotFound"
    case loadFailed = "LoadFailed"
    case invalidParameter = "InvalidParameter"
    case rewardNotFound = "RewardNotFound"
    case ledgerFailed = "LedgerFailed"
    case shuttingDown = "ShuttingDown"
    case rateLimited = "RateLimited"
    case tooManyOpenAds = "TooManyOpenAds"
    case tooManySessions = "TooManySessions"
    case permissionDenied = "PermissionDenied"
    case tooManyPrivacyRecords = "TooManyPrivacyRecords"
    case privacyNotStored = "PrivacyNotStored"

    static let interface = "io.adorch.Ads"

    var declaration: VarlinkDeclaration {
        switch self {
        case .noAdReady: VarlinkDeclaration(
            """
            # The slot has no valid ad right now, or none this caller may take: its ready ads are held for
            # other apps by the fair share (docs/rules.md, "Fair share"). It is being refilled, unless the
            # message says it cannot be (no plugin its waterfall names is loaded), or that it holds nothing
            # for this viewer: "\(ShowError.noEntryServesViewer)" (docs/privacy.md, "Inventory").
            """,
            "(slot: string, message: string)")
        case .slotNotFound: VarlinkDeclaration("# No slot has this id.", "(slot: string, message: string)")
        case .capped: VarlinkDeclaration(
            """
            # A frequency rule of the slot, or of every network with an ad for this user, holds the Show:
            # rule names it, its window in the largest whole unit (the stricter when several do); a Show after
            # retry_after_ms is let in, if no other ad is shown before (docs/caps.md).
            """,
            "(slot: string, rule: string, retry_after_ms: int, message: string)")
        case .adNotValid: VarlinkDeclaration("# The ad is unknown (an ad handed to another app answers the same), was never shown, has ended, or the event was already reported.", "(ad_id: string, message: string)")
        case .sessionNotFound: VarlinkDeclaration("# No live session has this id: it never existed, it was stopped, or it ended (another app's answers the same).", "(session_id: string, message: string)")
        case .loadFailed: VarlinkDeclaration("# A Load ended without ads: error is the host code of the last attempt (no_fill, timeout, ...).", "(slot: string, error: string, message: string, attempts: []Attempt)")
        case .invalidParameter: VarlinkDeclaration(
            """
            # A parameter is missing, of the wrong type, or out of range; a string over its bound names
            # the limit in bytes in message (docs/rules.md, "Bounded fields").
            """,
            "(parameter: string, message: string)")
        case .rewardNotFound: VarlinkDeclaration("# No reward has this transaction id.", "(trans_id: string, message: string)")
        case .ledgerFailed: VarlinkDeclaration("# The reward ledger could not be read or written.", "(message: string)")
        case .shuttingDown: VarlinkDeclaration("# The daemon is stopping; subscriptions end with this.", "()")
        case .rateLimited: VarlinkDeclaration(
            """
            # This uid called Show, Load, ListEvents or ListRewards, or Report, AckReward, SetPrivacy, Start,
            # Pause, Resume or Stop, faster than [limits] shows_per_second_per_uid, loads_per_second_per_uid,
            # lists_per_second_per_uid or reports_per_second_per_uid allows; message names which.
            """,
            "(retry_after_ms: int, message: string)")
        case .tooManyOpenAds: VarlinkDeclaration(
            """
            # This uid holds `open` ads not yet closed, expired or ended, and `loading` more are on their
            # way to it: the call would take it past [limits] max_open_ads_per_uid (`budget`, `limit`).
            # Report close on the ads it is done with. With `budget` max_unacknowledged_rewards_per_uid,
            # a rewarded Show: `open` rewards of this uid's ads wait unacknowledged in the ledger, its
            # `limit`; acknowledge them with AckReward (docs/rules.md, "A bound on unacknowledged rewards").
            """,
            "(budget: string, limit: int, open: int, loading: int, message: string)")
        case .tooManySessions: VarlinkDeclaration(
            """
            # This uid has `live` interactive sessions, [limits] max_sessions_per_uid (`budget`, `limit`):
            # stop one first.
            """,
            "(budget: string, limit: int, live: int, message: string)")
        case .permissionDenied: VarlinkDeclaration(
            """
            # The caller's user may not make this call: the config's [access] rules or the slot's
            # users and groups do not admit it, or the ad, reward or session belongs to another user.
            """,
            "(method: string, uid: int, message: string)")
        case .tooManyPrivacyRecords: VarlinkDeclaration(
            """
            # This uid holds `limit` privacy records, [limits] \(Budget.privacyRecords.key): clear one (SetPrivacy with
            # privacy null) before setting another user's. Nothing was changed.
            """,
            "(limit: int, message: string)")
        case .privacyNotStored: VarlinkDeclaration(
            "# The state directory could not take the privacy record (a full disk, an I/O error): nothing was changed.",
            "(message: string)")
        }
    }
}

extension VarlinkInterface {
    static let ads = VarlinkInterface("# Ads for the apps on this host: preloaded, valid, shown once.", methods: AdsMethod.self, errors: AdsError.self, members: [
        .type("""
            # A place in an app where ads are shown.
            type Slot (
              id: string,
              # rewarded, fullscreen, interstitial (preloaded); banner, splash, native (loaded with Load);
              # interactive (sessions: InitInteractive)
              format: string,
              # how many valid ads the daemon keeps ready now (its target, between buffer_min and buffer_max)
              buffer: int,
              buffer_min: int,
              buffer_max: int,
              # valid ads ready now: loaded, not shown, not expired
              ready: int,
              # loads in flight
              loading: int,
              # what the target is made of (preloaded slots)
              demand: ?Demand,
              # set when the slot cannot fill: why (no plugin its waterfall names is loaded)
              unservable: ?string,
              # set when a frequency rule would answer a Show for the user_id ListSlots was given Capped
              capped: ?CapHold
            )
            """),
        .type("""
            # A frequency rule that holds a slot for a user (docs/caps.md).
            type CapHold (
              # its window in the largest whole unit (60s is 1m), e.g. "3 per 1h per user", "pacing 30s per user", or for a
              # network's rule "sim: 1 per 1d per user"
              rule: string,
              # cap or pacing
              kind: string,
              # set for a network's rule: its plugin
              network: ?string,
              # a Show after this many milliseconds is let in, if no other ad is shown before
              retry_after_ms: int,
              # RFC 3339: the same moment
              until: string
            )
            """),
        .type(demandTypeIDL),
        .type("""
            # An ad handed to the app. It is no longer valid for anyone else.
            type Ad (
              # pass it to Report
              id: string,
              slot: string,
              # the plugin (ad network) that filled it
              network: string,
              format: string,
              # what the app needs to render it, from the network
              payload: object,
              # RFC 3339; the ad must be displayed before then
              expires_at: string,
              # the network's eCPM, 0 when unknown
              price: float
            )
            """),
        .type("""
            # Something that happened in the daemon. An app sees the events of the slots it may use, and a
            # reward_granted only if the ad was handed to its uid; root and the Manager users see all
            # (docs/rules.md, "Who sees what").
            type Event (
              # subscribed, ad_loaded, ad_failed, ad_timed_out, ad_expired, ad_replaced, ad_outbid, ad_shown,
              # ad_event, media_cached, slot_empty, network_paused, callback_ignored, contract_violation,
              # session_event, reward_granted
              kind: string,
              time: string,
              slot: ?string,
              ad_id: ?string,
              network: ?string,
              # the host error code: internal, network, no_fill, invalid_request, timeout, ...
              error: ?string,
              # the network's own error code
              network_code: ?int,
              message: ?string,
              # for ad_event: impression, click, close, complete, skip, start, first_quartile, midpoint, third_quartile
              viewer_event: ?string,
              # for ad_shown and reward_granted: the app's user id, if it gave one (only the app that gave it sees it)
              user_id: ?string,
              # the ad event vocabulary: loaded, media_cached, failed, shown, will_present, presented,
              # impression, click, left_application, skipped, play_finished, will_close, closed,
              # dislike, failed_to_display, reward, and the video's play_started, first_quartile,
              # midpoint, third_quartile; for session_event: fetch_complete, ads_available,
              # started (detail.campaign_name), opt_in (campaign_name, ad_id), opt_out (user_initiated),
              # skip_card_shown, user_cancel, popup_website (url), ad_free_pod, then exactly one of
              # completed (time_spent_s), no_ads_available, error (message) or stopped (the app's Stop)
              name: ?string,
              # what the network attached, e.g. a dislike's {"reasons": [...]}
              detail: ?object,
              # for session_event: the session it belongs to
              session_id: ?string,
              # for session_event: true on its last event (completed, no_ads_available, error or stopped)
              terminal: ?bool,
              # on the last event of a session: the viewer earned the ad-free pod; skip the pod's other ads
              ad_free_pod: ?bool,
              # for subscribed: unacknowledged rewards the caller may see beyond those redelivered (ListRewards)
              rewards_waiting: ?int
            )
            """),
        .method(AdsMethod.listSlots),
        .type("""
            # A reward model: what the viewer earns (docs/rules.md, "Rewards").
            type RewardModel (
              # at most \(FieldBounds.rewardName) bytes
              name: ?string,
              amount: ?int,
              # custom data passed through to the ledger and the callback; at most \(FieldBounds.rewardExtra) bytes
              extra: ?string
            )
            """),
        .type("""
            # A reward in the ledger.
            type Reward (
              trans_id: string,
              ad_id: string,
              user_id: string,
              slot: string,
              network: string,
              reward_name: string,
              reward_amount: int,
              extra: string,
              granted_at: string,
              acknowledged: bool
            )
            """),
        .type(PrivacyField.typeIDL),
        .method(AdsMethod.show),
        .method(AdsMethod.listRewards),
        .method(AdsMethod.ackReward),
        .method(AdsMethod.load),
        .method(AdsMethod.report),
        .type("""
            # Interactive sessions (docs/rules.md, "Interactive sessions"). Subscribe to the slot first: the
            # session's events, from fetch_complete to its one terminal event, come as session_event, to the
            # uid that made it alone.
            type SlotType (preroll, midroll)
            """),
        .method(AdsMethod.initInteractive),
        .method(AdsMethod.start),
        .method(AdsMethod.pause),
        .method(AdsMethod.resume),
        .method(AdsMethod.stop),
        .method(AdsMethod.listEvents),
        .method(AdsMethod.subscribe),
        .method(AdsMethod.setPrivacy),
        .method(AdsMethod.getPrivacy),
        .error(AdsError.noAdReady),
        .error(AdsError.slotNotFound),
        .error(AdsError.capped),
        .error(AdsError.adNotValid),
        .error(AdsError.sessionNotFound),
        .type("""
            # One waterfall attempt of a Load.
            type Attempt (network: string, ad_unit_id: string, error: string)
            """),
        .error(AdsError.loadFailed),
        .error(AdsError.invalidParameter),
        .error(AdsError.rewardNotFound),
        .error(AdsError.ledgerFailed),
        .error(AdsError.shuttingDown),
        .error(AdsError.rateLimited),
        .error(AdsError.tooManyOpenAds),
        .error(AdsError.tooManySessions),
        .error(AdsError.permissionDenied),
        .error(AdsError.tooManyPrivacyRecords),
        .error(AdsError.privacyNotStored),
    ])
}
