import AdorchVarlink

/// io.adorch.Manager: what operators call.
enum ManagerMethod: String, VarlinkMethodName {
    case getStatus = "GetStatus"
    case getMetrics = "GetMetrics"
    case verifyRewardCallback = "VerifyRewardCallback"
    case getCaps = "GetCaps"
    case reload = "Reload"

    static let interface = "io.adorch.Manager"

    var declaration: VarlinkDeclaration {
        switch self {
        case .getStatus: VarlinkDeclaration(
            "",
            """
            () -> (
              version: string,
              pid: int,
              uptime_s: float,
              socket: string,
              config: string,
              connections: Connections,
              limits: Limits,
              subscribers: int,
              plugins: []Plugin,
              slots: []Slot,
              networks: []Network,
              # plugin reports for ads the plugin does not own
              unattributed_callbacks: int,
              # the [metrics] listener, when the config sets one
              metrics: ?MetricsListener,
              # the notice outbox (docs/bidding.md, "Notices"), once a plugin gave notices
              notices: ?Notices
            )
            """)
        case .getMetrics: VarlinkDeclaration(
            """
            # The counters and gauges of GetStatus, with load and Show latency histograms, as Prometheus
            # text (docs/metrics.md lists every series). format: "text" (the 0.0.4 format, the default;
            # what promtool checks) or "openmetrics" (OpenMetrics 1.0, ending in # EOF).
            """,
            "(format: ?string) -> (text: string)")
        case .verifyRewardCallback: VarlinkDeclaration(
            """
            # Checks a reward callback's query string as docs/rules.md, "Server-to-server callback" says
            # (sign = sha256(key + ":" + trans_id)), refuses a replayed transaction, and returns the
            # JSON body the network expects. The key comes from [rewards] key_file, never the socket.
            """,
            "(query: string) -> (is_valid: bool, reason: ?string, body: string)")
        case .getCaps: VarlinkDeclaration(
            """
            # The frequency rules of a slot and its networks, with what each counts for user_id (without
            # one: for Shows without one) now: what `adorchctl caps` prints. A user id is an app's: uid
            # names the app (the uid its Shows come from; default: the caller's).
            """,
            """
            (
              slot: string,
              # at most \(FieldBounds.userID) bytes
              user_id: ?string,
              uid: ?int
            ) -> (rules: []CapRule)
            """)
        case .reload: VarlinkDeclaration("# Reads the config again and applies it; a bad config changes nothing.", "() -> (summary: string)")
        }
    }
}

enum ManagerError: String, VarlinkErrorName {
    case noRewardKey = "NoRewardKey"
    case ledgerFailed = "LedgerFailed"
    case slotNotFound = "SlotNotFound"
    case reloadFailed = "ReloadFailed"
    case permissionDenied = "PermissionDenied"

    static let interface = "io.adorch.Manager"

    var declaration: VarlinkDeclaration {
        switch self {
        case .noRewardKey: VarlinkDeclaration("# No reward key is configured.", "(message: string)")
        case .ledgerFailed: VarlinkDeclaration("# The reward ledger could not be written.", "(message: string)")
        case .slotNotFound: VarlinkDeclaration("# No slot has this id.", "(slot: string, message: string)")
        case .reloadFailed: VarlinkDeclaration("# The config could not be applied; the running one stays.", "(message: string)")
        case .permissionDenied: VarlinkDeclaration("# The caller's user is not in [access] manager_users or manager_groups (root always is).", "(method: string, uid: int, message: string)")
        }
    }
}

extension VarlinkInterface {
    static let manager = VarlinkInterface("# Operating the daemon: status, counters, reload.", methods: ManagerMethod.self, errors: ManagerError.self, members: [
        .type("""
            # refused: over max_connections or max_connections_per_uid since start
            type Connections (
              open: int,
              accepted: int,
              refused: int,
              # closed after idle_connection_timeout_s without a call
              closed_idle: int,
              # dropped as slow readers (ReaderTooSlow)
              dropped_slow_readers: int,
              # cut off with part of a message (IncompleteMessage)
              incomplete_messages: int,
              # refused for calls received and not handled (TooManyPendingBytes)
              dropped_pending_bytes: int
            )
            """),
        .type("""
            # What one client may take of the daemon: the config's [limits] (and max_message_bytes).
            type Limits (
              max_connections: int,
              max_connections_per_uid: int,
              root_reserved_connections: int,
              idle_connection_timeout_s: int,
              max_message_bytes: int,
              partial_message_timeout_ms: int,
              max_queued_calls: int,
              max_unsent_bytes: int,
              max_unsent_bytes_per_uid: int,
              max_pending_bytes_per_uid: int,
              # 0: no limit
              shows_per_second_per_uid: float,
              show_burst_per_uid: float,
              loads_per_second_per_uid: float,
              load_burst_per_uid: float,
              lists_per_second_per_uid: float,
              list_burst_per_uid: float,
              reports_per_second_per_uid: float,
              report_burst_per_uid: float,
              max_open_ads_per_uid: int,
              max_sessions_per_uid: int,
              unstarted_session_timeout_s: int,
              fair_share_window_s: int,
              max_unacknowledged_rewards_per_uid: int,
              max_privacy_records_per_uid: int,
              # calls refused by each budget since start
              shows_rate_limited: int,
              loads_rate_limited: int,
              lists_rate_limited: int,
              reports_rate_limited: int,
              open_ads_refused: int,
              sessions_refused: int,
              fair_share_refused: int,
              unacknowledged_rewards_refused: int,
              privacy_records_refused: int
            )
            """),
        .type("""
            type Plugin (
              name: string,
              # loaded, restarting (an isolated plugin's host died and is being replaced),
              # disabled (past its crash budget, until a reload) or refused
              state: string,
              path: string,
              version: ?string,
              abi: ?string,
              # built for ABI 1.4 or later: its loads carry the viewer's privacy signals; false:
              # it is asked only for loads that need none (docs/privacy.md)
              receives_privacy_signals: ?bool,
              formats: []string,
              description: ?string,
              # why it was refused or disabled
              error: ?string,
              # the plugin's own counters, if it keeps any (sim: creates, loads, shows, contract_violations, ...)
              stats: ?object,
              # process (a host process of its own) or in-process (docs/isolation.md)
              isolation: ?string,
              # the isolated plugin's host process, while it runs
              pid: ?int,
              # times its host died or was killed since it was loaded
              crashes: ?int,
              # how its host last died: the signal, or why the daemon killed it
              last_crash: ?string,
              # what confines its host, as the host said when it started: its box, then each layer applied or refused (docs/confinement.md)
              confinement: ?string
            )
            """),
        .type("""
            type Counters (
              loads: int,
              fills: int,
              no_fills: int,
              errors: int,
              timeouts: int,
              shows: int,
              expired: int,
              replaced: int,
              ran_dry: int,
              ignored_callbacks: int,
              contract_violations: int,
              impressions: int,
              clicks: int,
              # viewer reports repeating one made for the ad: a second click (dropped) or a second
              # once-only event (refused)
              duplicate_reports: int,
              rewards: int,
              # second grants for one ad, refused
              duplicate_rewards: int,
              # shows whose plugin could not present the ad (the next one was handed out)
              display_failures: int,
              # ready ads an auction gave to higher prices, and loads refused under the floor
              # (docs/bidding.md, "The auction")
              outbid: int,
              below_floor: int
            )
            """),
        .type("""
            type WaterfallEntry (
              plugin: string,
              ad_unit_id: string,
              timeout_ms: int,
              # loads asked of this entry, and how many it filled
              loads: int,
              fills: int,
              failures_in_row: int,
              # the host error code of its last failure
              last_error: ?string,
              # how long this entry still rests after failures
              backoff_ms: int,
              # what its loads have shown the scheduler (moving averages over about 20 loads)
              estimate: EntryEstimate,
              # docs/bidding.md, "The auction": true for a bidder; the configured eCPM; the
              # average of the prices its ads reported (per 1,000 impressions)
              bidder: ?bool,
              ecpm: ?float,
              learned_ecpm: ?float
            )
            """),
        .type("""
            type EntryEstimate (
              # seconds from a load's start to its answer, filled or not
              attempt_s: float,
              # the share of loads that brought an ad
              fill_rate: float,
              # seconds a loaded ad stays valid
              ad_lifetime_s: float,
              # loads seen (the prior counts as one)
              samples: int
            )
            """),
        .type(demandTypeIDL),
        .type("""
            type Network (
              name: string,
              loads_in_flight: int,
              # how long it is still paused after a rate_limited answer
              paused_ms: int,
              # loads per minute it is kept under, learned from its rate_limited answers
              learned_limit_per_minute: ?int
            )
            """),
        .type("""
            type ReadyByClass (
              personalized: int,
              non_personalized: int,
              child_directed: int
            )
            """),
        .type("""
            type Slot (
              id: string,
              format: string,
              # the target now, between buffer_min and buffer_max (equal for a fixed buffer)
              buffer: int,
              buffer_min: int,
              buffer_max: int,
              demand: ?Demand,
              ready: int,
              loading: int,
              shown_open: int,
              # the ids of the ready ads, oldest first
              ready_ads: []string,
              # how many of them each privacy class holds (docs/privacy.md, "Inventory")
              ready_by_class: ReadyByClass,
              ttl_s: int,
              # how many waterfall entries a refill asks at once (1: one after the other)
              parallel: int,
              # the lowest price per 1,000 impressions the slot takes, 0 for none (docs/bidding.md)
              floor: float,
              waterfall: []WaterfallEntry,
              counters: Counters,
              # set when the slot cannot fill: why (no plugin its waterfall names is loaded)
              unservable: ?string,
              # interactive slots: how long a session may fetch, and wait for its unit to start
              fetch_timeout_ms: ?int,
              start_timeout_ms: ?int,
              # interactive slots: their sessions now and since start
              sessions: ?Sessions
            )
            """),
        .type("""
            # An interactive slot's sessions: live now, and how those since start ended.
            type Sessions (
              live: int,
              initiated: int,
              completed: int,
              no_ads_available: int,
              errors: int,
              stopped: int,
              fetch_timeouts: int,
              start_timeouts: int,
              unstarted_timeouts: int,
              ad_free_pods: int,
              ignored_callbacks: int,
              contract_violations: int
            )
            """),
        .method(ManagerMethod.getStatus),
        .type("""
            # The HTTP metrics listener ([metrics] listen, docs/metrics.md): listening, or the error
            # that stopped it (applied again at each reload).
            type MetricsListener (
              listen: string,
              listening: bool,
              error: ?string
            )

            # Bidders' win, billing and loss notices, sent from the state directory's outbox.
            type Notices (
              # waiting to be sent (again)
              due: int,
              # kept for ads still alive, until their fate names which go
              held: int,
              # steps the outbox could not take yet (a full disk), written again every second
              unwritten: int,
              # ads whose notices were refused since start: their plugin's waiting notices past 16 MiB
              over_bound: int,
              # answered 2xx or 3xx since start
              sent: int,
              # refused for good (4xx but 408 and 429, a redirect loop) since start: not sent again
              refused: int,
              # failed attempts since start, each tried again after its backoff
              retried: int,
              # failed for 24 hours since start: given up
              given_up: int
            )
            """),
        .method(ManagerMethod.getMetrics),
        .method(ManagerMethod.verifyRewardCallback),
        .error(ManagerError.noRewardKey),
        .error(ManagerError.ledgerFailed),
        .type("""
            # One frequency rule of a slot or of one of its networks, and what it counts now (docs/caps.md).
            type CapRule (
              # as Capped names it, e.g. "3 per 1h per user", "sim: pacing 30s per slot"
              rule: string,
              # cap or pacing
              kind: string,
              # user or slot
              scope: string,
              # set for a network's rule: its plugin and ad unit
              network: ?string,
              ad_unit_id: ?string,
              # at most this many ads in any window of window_ms
              impressions: int,
              window_ms: int,
              # impressions the rule counts for the user (or the slot) now
              counted: int,
              # set when the rule holds a Show now: a Show after this many milliseconds is let in
              retry_after_ms: ?int,
              # RFC 3339: the same moment
              until: ?string
            )
            """),
        .method(ManagerMethod.getCaps),
        .error(ManagerError.slotNotFound),
        .method(ManagerMethod.reload),
        .error(ManagerError.reloadFailed),
        .error(ManagerError.permissionDenied),
    ])
}

/// io.adorch.Debug: served only with `adorchd --debug-interface`, for tests.
enum DebugMethod: String, VarlinkMethodName {
    case freezeEngine = "FreezeEngine"

    static let interface = "io.adorch.Debug"

    var declaration: VarlinkDeclaration {
        switch self {
        case .freezeEngine: VarlinkDeclaration(
            """
            # Blocks the engine queue for this long (at most 60 s), as a stuck engine would: the
            # watchdog pings, which are sent from that queue, must stop meanwhile.
            """,
            "(seconds: float) -> ()")
        }
    }
}

enum DebugError: String, VarlinkErrorName {
    case permissionDenied = "PermissionDenied"

    static let interface = "io.adorch.Debug"

    var declaration: VarlinkDeclaration {
        switch self {
        case .permissionDenied: VarlinkDeclaration(
            "# The caller's user may not make this call: the config's [access] rules do not admit it.",
            "(method: string, uid: int, message: string)")
        }
    }
}

extension VarlinkInterface {
    static let debug = VarlinkInterface("# Test hooks. Never enabled in production: adorchd serves this only with --debug-interface.",
                                        methods: DebugMethod.self, errors: DebugError.self, members: [
        .method(DebugMethod.freezeEngine),
        .error(DebugError.permissionDenied),
    ])
}
