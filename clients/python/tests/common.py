"""What the tests share: the daemon they run against (PythonClientTests.swift starts it with
adorchd-test.toml beside this file and sets ADORCH_SOCKET) and that config's slots."""
import os
import re

SOCKET = os.environ.get("ADORCH_SOCKET", "")
REWARDED, INTERSTITIAL, EMPTY = "rewarded", "interstitial", "empty"
BANNER, SPLASH, NATIVE, INTERACTIVE = "banner", "splash", "native", "interactive"
#: adorchd-test.toml's reward model of the rewarded slot.
REWARD_NAME, REWARD_AMOUNT = "coins", 10
CREATIVE_URL = "https://creative.invalid/unit.js"
#: Seconds any one wait may take before the test fails.
WAIT = 20.0


def idl_errors(description: str) -> list[str]:
    """The names of an interface description's `error NAME (...)` lines."""
    return re.findall(r"^error (\w+)", description, re.MULTILINE)

#: Why the daemon's tests skip when ADORCH_SOCKET is not set.
NO_DAEMON = "ADORCH_SOCKET is not set (PythonClientTests.swift runs these against adorchd)"
