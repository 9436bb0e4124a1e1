#!/usr/bin/env python3
"""Shows a rewarded ad and prints the reward.

    PYTHONPATH=clients/python python3 examples/python/rewarded.py [SLOT] [USER_ID]

(or without PYTHONPATH once `pip install ./clients/python` ran). The socket is found as
adorchctl finds it; ADORCH_SOCKET overrides it. SLOT defaults to the default config's rewarded_main.
"""
import logging
import sys

import adorch


def main() -> int:
    slot = sys.argv[1] if len(sys.argv) > 1 else "rewarded_main"
    user_id = sys.argv[2] if len(sys.argv) > 2 else "example-user"
    # The library logs its reconnects here.
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    with adorch.Client() as client:
        rewarded = adorch.RewardedAd(client, slot)
        rewarded.load(timeout=30)
        with rewarded.show(user_id=user_id) as ad:
            print(f"showing ad {ad.id} from {ad.network} (expires {ad.expires_at})")
            ad.on_impression(lambda event: print("impression"))
            ad.on_close(lambda event: print("closed"))
            # What the app's player reports as the viewer watches it to the end.
            ad.impression()
            ad.complete()
            reward = ad.wait_reward(timeout=30)
            ad.close()
            ad.wait_for("close", timeout=30)
        print(f"reward: {reward.reward_amount} {reward.reward_name} for {reward.user_id} (transaction {reward.trans_id})")
        # Ledger first: acknowledge only once the user has been credited.
        reward.ack()
    return 0


if __name__ == "__main__":
    sys.exit(main())
