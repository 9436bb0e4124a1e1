"""adorch: the client library of adorchd, the ad daemon (its Varlink API io.adorch.Ads, and
Manager.GetStatus and GetCaps). Sync: adorch.Client; asyncio: adorch.AsyncClient. See README.md."""
from ._api import DEFAULT_RECONNECT_TIMEOUT, socket_path
from .aio import AsyncClient, AsyncEventStream
from .aio_ads import (AsyncBannerAd, AsyncBoundReward, AsyncFullscreenAd, AsyncInteractiveSession,
                      AsyncInterstitialAd, AsyncNativeAdLoader, AsyncPreloadedAd, AsyncRewardedAd,
                      AsyncShownAd, AsyncSplashAd)
from .ads import (BannerAd, BoundReward, FullscreenAd, InteractiveSession, InterstitialAd, NativeAdLoader,
                  PreloadedAd, RewardedAd, ShownAd, SplashAd)
from .client import Client, EventStream
from .errors import (AdorchError, ConnectionFailure, CannotConnect, ConnectionLost, Timeout, ProtocolError, Closed, NoAdReady,
                     SlotNotFound, AdNotValid, SessionNotFound, LoadFailed, InvalidParameter, RewardNotFound,
                     LedgerFailed, ShuttingDown, RateLimited, Capped, TooManyOpenAds, TooManySessions,
                     TooManyPrivacyRecords, PrivacyNotStored, PermissionDenied, NoRewardKey, ReloadFailed, TooManyConnections, TooManyPendingBytes,
                     ReaderTooSlow, IncompleteMessage, InterfaceNotFound, MethodNotFound,
                     MethodNotImplemented, VarlinkInvalidParameter, ExpectedMore, VarlinkPermissionDenied,
                     ERRORS, CONNECTION_REFUSALS, error_from_reply)
from .types import (Ad, AppliedPrivacy, CapHold, CapRule, Demand, Event, Privacy, Reward, RewardModel, Rewards, Slot,
                    SlotType, Status)

__all__ = [
    "DEFAULT_RECONNECT_TIMEOUT", "socket_path",
    "Client", "EventStream", "AsyncClient", "AsyncEventStream",
    "Ad", "AppliedPrivacy", "CapHold", "CapRule", "Demand", "Event", "Privacy", "Reward", "RewardModel", "Rewards", "Slot",
    "SlotType", "Status",
    "PreloadedAd", "RewardedAd", "InterstitialAd", "FullscreenAd", "ShownAd", "BoundReward",
    "BannerAd", "SplashAd", "NativeAdLoader", "InteractiveSession",
    "AsyncPreloadedAd", "AsyncRewardedAd", "AsyncInterstitialAd", "AsyncFullscreenAd", "AsyncShownAd",
    "AsyncBoundReward", "AsyncBannerAd", "AsyncSplashAd", "AsyncNativeAdLoader", "AsyncInteractiveSession",
    "AdorchError", "ConnectionFailure", "CannotConnect", "ConnectionLost", "Timeout", "ProtocolError", "Closed", "NoAdReady",
    "SlotNotFound", "AdNotValid", "SessionNotFound", "LoadFailed", "InvalidParameter", "RewardNotFound",
    "LedgerFailed", "ShuttingDown", "RateLimited", "Capped", "TooManyOpenAds", "TooManySessions",
    "TooManyPrivacyRecords", "PrivacyNotStored", "PermissionDenied",
    "NoRewardKey", "ReloadFailed", "TooManyConnections", "TooManyPendingBytes", "ReaderTooSlow",
    "IncompleteMessage", "InterfaceNotFound", "MethodNotFound", "MethodNotImplemented",
    "VarlinkInvalidParameter", "ExpectedMore", "VarlinkPermissionDenied", "ERRORS", "CONNECTION_REFUSALS",
    "error_from_reply",
]
