import CAdorchPlugin

/// The host's name for one ad: never reused within one engine's life.
public typealias AdID = UInt64

/// Everything a plugin needs to create and load one fresh ad object.
public struct LoadOrder: Sendable, Equatable {
    public var adID: AdID
    public var plugin: String
    public var slotID: String
    public var format: AdFormat
    public var entry: WaterfallEntry
    public var deadline: Moment
    public var reward: RewardModel?
    public var testMode: Bool
    public var targetingJSON: String
    /// For Load requests: how many ads, what size, native variant and image options.
    public var count: Int = 1
    public var width: Int = 0
    public var height: Int = 0
    public var variant: String = ""
    public var imageOptionsJSON: String = "{}"
    /// For interactive sessions: what the app was given for the break.
    public var interactive: InteractiveRequest?
    /// The class this ad is loaded under and the signals its plugin receives.
    public var privacy = LoadPrivacy(privacyClass: .personalized, signals: PrivacySignals())
    /// The slot's floor per 1,000 impressions, 0 for none (docs/bidding.md, "Floors").
    public var floor = 0.0
}

extension LoadOrder {
    /// The rest as their defaults: how an isolated plugin's host rebuilds an order (PluginWire).
    public init(adID: AdID, plugin: String, slotID: String, format: AdFormat, entry: WaterfallEntry, deadline: Moment,
                reward: RewardModel?, testMode: Bool, targetingJSON: String) {
        self.adID = adID
        self.plugin = plugin
        self.slotID = slotID
        self.format = format
        self.entry = entry
        self.deadline = deadline
        self.reward = reward
        self.testMode = testMode
        self.targetingJSON = targetingJSON
    }
}

/// What InitInteractive hands the plugin (the renderer's init parameters).
public struct InteractiveRequest: Sendable, Equatable {
    public var creativeURL: String
    /// The ad's AdParameters, a JSON object.
    public var adParametersJSON: String
    public var slotType: SlotType

    public enum SlotType: String, Sendable, CaseIterable {
        case preroll, midroll
    }

    public init(creativeURL: String, adParametersJSON: String, slotType: SlotType) {
        self.creativeURL = creativeURL
        self.adParametersJSON = adParametersJSON
        self.slotType = slotType
    }
}

/// The host's name for one Load request.
public typealias RequestID = UInt64

/// Why a Load gave no ads: the host code of the last attempt, and every attempt in order.
public struct LoadFailure: Error, Sendable, Equatable {
    public var code: AdErrorCode
    public var message: String
    /// (plugin, host code) of each waterfall entry tried, in order.
    public var attempts: [Attempt]

    public struct Attempt: Sendable, Equatable {
        public var plugin: String
        public var adUnitID: String
        public var code: AdErrorCode
    }
}

/// What an app may ask of a Load; nil means the slot's default.
public struct LoadParameters: Sendable, Equatable {
    public var count: Int?
    public var width: Int?
    public var height: Int?
    public var timeout: Duration?
    /// The targeting for this request (the slot's with the app's keys over it), as a JSON object.
    public var targetingJSON: String?

    public init(count: Int? = nil, width: Int? = nil, height: Int? = nil, timeout: Duration? = nil, targetingJSON: String? = nil) {
        self.count = count
        self.width = width
        self.height = height
        self.timeout = timeout
        self.targetingJSON = targetingJSON
    }
}

/// What the app's viewer did with a shown ad.
public enum ViewerEvent: String, Sendable, CaseIterable {
    case impression, click, close, complete, skip
    /// Video progress, for networks that track it (VAST's start and quartiles).
    case start, firstQuartile = "first_quartile", midpoint, thirdQuartile = "third_quartile"

    /// Events that happen at most once per ad; a second report is refused.
    var once: Bool { self != .click }

    /// The name in the event vocabulary (docs/rules.md, "Viewer reports").
    public var vocabularyName: String { abi.vocabularyName }

    public var abi: adorch_event {
        switch self {
        case .impression: .ADORCH_EVENT_IMPRESSION
        case .click: .ADORCH_EVENT_CLICK
        case .close: .ADORCH_EVENT_CLOSE
        case .complete: .ADORCH_EVENT_COMPLETE
        case .skip: .ADORCH_EVENT_SKIP
        case .start: .ADORCH_EVENT_START
        case .firstQuartile: .ADORCH_EVENT_FIRST_QUARTILE
        case .midpoint: .ADORCH_EVENT_MIDPOINT
        case .thirdQuartile: .ADORCH_EVENT_THIRD_QUARTILE
        }
    }
}

/// adorch/plugin.h's events as adorch knows them: the one table of event names. A switch
/// over the header's enum, so an event added there does not build until it has its line here.
extension adorch_event {
    /// The event with this number, or nil for one the header does not have; checked as
    /// adorch_format(abiValue:) says why.
    public init?(abiValue: UInt32) {
        guard let value = adorch_event(rawValue: abiValue) else { return nil }
        switch value {
        case .ADORCH_EVENT_MEDIA_CACHED, .ADORCH_EVENT_IMPRESSION, .ADORCH_EVENT_CLICK, .ADORCH_EVENT_CLOSE,
             .ADORCH_EVENT_COMPLETE, .ADORCH_EVENT_SKIP, .ADORCH_EVENT_REWARD, .ADORCH_EVENT_SHOW_FAILED,
             .ADORCH_EVENT_WILL_PRESENT, .ADORCH_EVENT_PRESENTED, .ADORCH_EVENT_LEFT_APPLICATION,
             .ADORCH_EVENT_WILL_CLOSE, .ADORCH_EVENT_DISLIKE, .ADORCH_EVENT_ADS_AVAILABLE, .ADORCH_EVENT_STARTED,
             .ADORCH_EVENT_OPT_IN, .ADORCH_EVENT_OPT_OUT, .ADORCH_EVENT_SKIP_CARD_SHOWN, .ADORCH_EVENT_USER_CANCEL,
             .ADORCH_EVENT_POPUP_WEBSITE, .ADORCH_EVENT_AD_FREE_POD, .ADORCH_EVENT_COMPLETED,
             .ADORCH_EVENT_NO_ADS_AVAILABLE, .ADORCH_EVENT_ERROR, .ADORCH_EVENT_PAUSE, .ADORCH_EVENT_RESUME,
             .ADORCH_EVENT_START, .ADORCH_EVENT_FIRST_QUARTILE, .ADORCH_EVENT_MIDPOINT, .ADORCH_EVENT_THIRD_QUARTILE,
             .ADORCH_EVENT_LOSS:
            self = value
        @unknown default:
            return nil
        }
    }

    /// Its name in the event vocabulary (docs/rules.md, "Viewer reports"): what subscribers and logs see.
    public var vocabularyName: String { vocabulary.name }

    /// Whether a plugin may report it through host->event; the others only the host sends,
    /// through ad_notify.
    public var isReportedByPlugins: Bool { vocabulary.fromPlugins }

    private var vocabulary: (name: String, fromPlugins: Bool) {
        switch self {
        case .ADORCH_EVENT_MEDIA_CACHED: ("media_cached", true)
        case .ADORCH_EVENT_IMPRESSION: ("impression", true)
        case .ADORCH_EVENT_CLICK: ("click", true)
        case .ADORCH_EVENT_CLOSE: ("closed", true)
        case .ADORCH_EVENT_COMPLETE: ("play_finished", true)
        case .ADORCH_EVENT_SKIP: ("skipped", true)
        case .ADORCH_EVENT_REWARD: ("reward", true)
        case .ADORCH_EVENT_SHOW_FAILED: ("failed_to_display", true)
        case .ADORCH_EVENT_WILL_PRESENT: ("will_present", true)
        case .ADORCH_EVENT_PRESENTED: ("presented", true)
        case .ADORCH_EVENT_LEFT_APPLICATION: ("left_application", true)
        case .ADORCH_EVENT_WILL_CLOSE: ("will_close", true)
        case .ADORCH_EVENT_DISLIKE: ("dislike", true)
        case .ADORCH_EVENT_ADS_AVAILABLE: ("ads_available", true)
        case .ADORCH_EVENT_STARTED: ("started", true)
        case .ADORCH_EVENT_OPT_IN: ("opt_in", true)
        case .ADORCH_EVENT_OPT_OUT: ("opt_out", true)
        case .ADORCH_EVENT_SKIP_CARD_SHOWN: ("skip_card_shown", true)
        case .ADORCH_EVENT_USER_CANCEL: ("user_cancel", true)
        case .ADORCH_EVENT_POPUP_WEBSITE: ("popup_website", true)
        case .ADORCH_EVENT_AD_FREE_POD: ("ad_free_pod", true)
        case .ADORCH_EVENT_COMPLETED: ("completed", true)
        case .ADORCH_EVENT_NO_ADS_AVAILABLE: ("no_ads_available", true)
        case .ADORCH_EVENT_ERROR: ("error", true)
        case .ADORCH_EVENT_PAUSE: (SessionControl.pause.rawValue, false)
        case .ADORCH_EVENT_RESUME: (SessionControl.resume.rawValue, false)
        case .ADORCH_EVENT_START: ("play_started", false)
        case .ADORCH_EVENT_FIRST_QUARTILE: ("first_quartile", false)
        case .ADORCH_EVENT_MIDPOINT: ("midpoint", false)
        case .ADORCH_EVENT_THIRD_QUARTILE: ("third_quartile", false)
        case .ADORCH_EVENT_LOSS: ("loss", false)
        }
    }
}

/// Something worth telling subscribers and the log.
public struct EngineEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case adLoaded = "ad_loaded"
        case adFailed = "ad_failed"
        case adTimedOut = "ad_timed_out"
        case adExpired = "ad_expired"
        case adReplaced = "ad_replaced"
        /// A bidder's or walked entry's ad its auction gave to higher prices (docs/bidding.md).
        case adOutbid = "ad_outbid"
        case adShown = "ad_shown"
        case adEvent = "ad_event"
        case mediaCached = "media_cached"
        case slotEmpty = "slot_empty"
        case networkPaused = "network_paused"
        case callbackIgnored = "callback_ignored"
        /// Emitted by the shell once a reward is in the ledger.
        case rewardGranted = "reward_granted"
        case contractViolation = "contract_violation"
        /// Something in an interactive session, named by `sessionEvent`.
        case session = "session_event"
    }

    public var kind: Kind
    public var slot: String?
    public var adID: AdID?
    public var network: String?
    public var errorCode: AdErrorCode?
    public var networkCode: Int64?
    public var message: String?
    /// The viewer event for `.adEvent`.
    public var viewerEvent: ViewerEvent?
    /// The app's user, for `.adShown`.
    public var userID: String?
    /// A plugin event's detail, a JSON object (a dislike's reasons).
    public var detailJSON: String?
    /// For `.session`: fetch_complete, ads_available, started, opt_in, opt_out,
    /// skip_card_shown, user_cancel, popup_website, ad_free_pod, or a terminal one.
    public var sessionEvent: String?
    /// For `.session`: the session's last event (completed, no_ads_available, error, stopped).
    public var terminal = false
    /// For a terminal `.session` event: the viewer earned the ad-free-pod credit before it.
    public var adFreePod = false
    /// The uid whose ad (or session) the event is about, when one holds it: handed to it by a
    /// Show or a Load, loading for its Load, or its interactive session. Such an event tells
    /// who watched what, and under which privacy class: it goes to that uid and the operator
    /// alone (docs/rules.md, "Who sees what"). nil: the ad is no app's yet (a preload's).
    public var holder: UInt32?

    /// The event's name in the ad event vocabulary subscribers see: loaded, media_cached,
    /// failed, will_present, presented, impression, click, left_application, skipped,
    /// play_finished, will_close, closed, dislike, failed_to_display, reward, shown.
    public var name: String? {
        switch kind {
        case .adLoaded: "loaded"
        case .adFailed, .adTimedOut: "failed"
        case .mediaCached: "media_cached"
        case .adShown: "shown"
        case .rewardGranted: "reward"
        case .adEvent: viewerEvent?.vocabularyName ?? message
        case .session: sessionEvent
        default: nil
        }
    }

    public init(
        _ kind: Kind, slot: String? = nil, adID: AdID? = nil, network: String? = nil,
        errorCode: AdErrorCode? = nil, networkCode: Int64? = nil, message: String? = nil,
        viewerEvent: ViewerEvent? = nil, userID: String? = nil, holder: UInt32? = nil
    ) {
        self.kind = kind
        self.slot = slot
        self.adID = adID
        self.network = network
        self.errorCode = errorCode
        self.networkCode = networkCode
        self.message = message
        self.viewerEvent = viewerEvent
        self.userID = userID
        self.holder = holder
    }
}

/// What the engine asks the shell to do.
public enum Effect: Sendable, Equatable {
    /// Create a fresh object in the plugin and load it once.
    case load(LoadOrder)
    /// Tell the plugin its ad is being shown (`user_id` and context go with it).
    case show(AdID, plugin: String, userID: String?)
    /// Forward a viewer event to the plugin.
    case notify(AdID, plugin: String, event: ViewerEvent)
    /// Tell a bidder's plugin why its ad ends unshown (ADORCH_EVENT_LOSS); its destroy follows.
    case lose(AdID, plugin: String, reason: AuctionLoss)
    /// Destroy the plugin's object; nothing about this ad is accepted afterwards.
    case destroy(AdID, plugin: String)
    /// Move the ad's notices in the outbox (docs/bidding.md, "Notices"); a `.win` comes before
    /// the Show's answer, so that it is durable before anyone is told.
    case notice(AdID, plugin: String, NoticeStep)
    /// Tell subscribers and the log.
    case emit(EngineEvent)
    /// Drop a `.show` of this ad its plugin has not started yet: the engine stopped waiting.
    case withdrawShow(AdID, plugin: String)
    /// A Show call ended: the ad its plugin presented, or why there is none.
    case completeShow(RequestID, Result<ShownAd, ShowError>)
    /// A Load request ended: its ads (already handed to the app), or why there are none.
    case completeLoad(RequestID, Result<[ShownAd], LoadFailure>)
    /// A reward was earned: write it to the ledger, and only then tell anyone.
    case grantReward(RewardGrant)
    /// An impression counted against frequency rules: keep it in the state directory, so a
    /// cap holds across a restart (docs/caps.md, "Durable").
    case recordImpression(CountedImpression)
    /// Start an interactive session (the plugin's ad_show). If the plugin refuses, the shell
    /// tells `InteractiveSessions.startRefused`.
    case startSession(AdID, plugin: String)
    /// Pause or resume an interactive session (the plugin's ad_notify).
    case controlSession(AdID, plugin: String, SessionControl)
    /// Keep (or replace) this promise on disk: a rewarded ad's complete may come after a
    /// restart (docs/rules.md, "Across a restart").
    case keepPromise(PromisedReward)
    /// The ad's promise is void: it ended unrewarded.
    case dropPromise(AdID)
}

/// What an app may do to a running interactive session besides start and stop.
public enum SessionControl: String, Sendable {
    case pause, resume

    public var abi: adorch_event { self == .pause ? .ADORCH_EVENT_PAUSE : .ADORCH_EVENT_RESUME }
}

/// A reward earned on one ad, for the ledger.
public struct RewardGrant: Sendable, Equatable {
    public var adID: AdID
    public var slot: String
    public var network: String
    public var userID: String
    public var reward: RewardModel
    /// The network's transaction id, if it gave one; the daemon makes one otherwise.
    public var networkTransID: String?
    /// The uid the ad was handed to: whose reward it is (the ad may have ended by the time
    /// the grant is carried out).
    public var holder: UInt32?
}

/// A plugin's report about one ad, as the plugin host decoded it.
public enum PluginReport: Sendable, Equatable {
    /// Loaded with a valid JSON object; the host read the keys it understands: the ad's
    /// lifetime, its price, and whether the plugin tracks impressions and clicks itself.
    case loaded(payloadJSON: String, expiresIn: Duration?, price: Double?, tracksItself: Bool = false, items: [PayloadItem] = [],
                rewardByNetwork: Bool = false, notices: AdNotices? = nil)
    /// Loaded, but the payload is not a JSON object: the plugin broke the contract.
    case loadedInvalid(reason: String)
    case failed(AdErrorCode, networkCode: Int64, message: String)
    case mediaCached
    /// Another event from the plugin (reward, presented, dislike, …), passed on as it came,
    /// with its detail (a JSON object) if it had one.
    case other(name: String, detailJSON: String? = nil)
    /// The network granted the viewer's reward (for networks that decide it themselves).
    case reward(transID: String?)
    /// Not from the plugin but about it: its ad_destroy for this ad returned. Reports that
    /// were already on their way before that are not the plugin's fault.
    case destroyed
}

/// One ad of a payload: the payload itself, or one element of its "ads" array (native ads
/// loaded several at once). The host reads what the engine checks.
public struct PayloadItem: Sendable, Equatable {
    public var json: String
    /// A native ad must have a non-empty "headline".
    public var hasHeadline: Bool
    /// Its own notices, for an ad handed to the app by a Load.
    public var notices: AdNotices?

    public init(json: String, hasHeadline: Bool, notices: AdNotices? = nil) {
        self.json = json
        self.hasHeadline = hasHeadline
        self.notices = notices
    }
}
