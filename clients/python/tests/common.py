"""What the tests share: the daemon they run against (PythonClientTests.swift starts it with
adorchd-test.toml beside this file and sets ADORCH_SOCKET) and that config's slots."""
import os
import re
import time
from collections.abc import Callable

SOCKET = os.environ.get("ADORCH_SOCKET", "")
REWARDED, INTERSTITIAL, EMPTY = "rewarded", "interstitial", "empty"
BANNER, SPLASH, NATIVE, INTERACTIVE = "banner", "splash", "native", "interactive"
SLOW_BANNER, NO_FILL_BANNER = "slowbanner", "nofillbanner"
#: An interstitial slot paced at one ad a minute per user, and its rule as Capped names it.
PACED, PACING_RULE = "paced", "pacing 1m per user"
#: adorchd-test.toml's pacing of PACED, in milliseconds: a Capped's retry_after_ms is at most this.
PACING_MS = 60_000
#: SLOW_BANNER's sim latency is 1.5 s: a call timeout well under it.
SHORT_CALL_TIMEOUT = 0.5
#: adorchd-test.toml's reward model of the rewarded slot.
REWARD_NAME, REWARD_AMOUNT = "coins", 10
CREATIVE_URL = "https://creative.invalid/unit.js"
#: Seconds any one wait may take before the test fails.
WAIT = 20.0


def idl_errors(description: str) -> list[str]:
    """The names of an interface description's `error NAME (...)` lines."""
    return re.findall(r"^error (\w+)", description, re.MULTILINE)


def idl_error_fields(description: str) -> dict[str, dict[str, str]]:
    """Each `error NAME (field: type, ...)` line's fields and their IDL types."""
    return {name: dict(re.findall(r"(\w+): ([^,]+)", fields))
            for name, fields in re.findall(r"^error (\w+) \((.*)\)", description, re.MULTILINE)}


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Polls condition (a daemon's state) until it holds; AssertionError after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WAIT} s")
        time.sleep(0.05)


#: Why the daemon's tests skip when ADORCH_SOCKET is not set.
NO_DAEMON = "ADORCH_SOCKET is not set (PythonClientTests.swift runs these against adorchd)"
