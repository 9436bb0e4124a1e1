"""examples/python/rewarded.py runs against the daemon and prints the reward."""
import os
import subprocess
import sys
import unittest
from pathlib import Path

from .common import REWARD_AMOUNT, REWARD_NAME, REWARDED, SOCKET, WAIT, NO_DAEMON

PACKAGE = Path(__file__).resolve().parent.parent
EXAMPLE = PACKAGE.parent.parent / "examples" / "python" / "rewarded.py"


@unittest.skipIf(not SOCKET, NO_DAEMON)
class ExampleTests(unittest.TestCase):
    def test_rewarded_example_prints_the_reward(self) -> None:
        run = subprocess.run([sys.executable, "-B", str(EXAMPLE), REWARDED, "example-user"], capture_output=True,
                             text=True, timeout=3 * WAIT, env={**os.environ, "PYTHONPATH": str(PACKAGE), "ADORCH_SOCKET": SOCKET})
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(f"reward: {REWARD_AMOUNT} {REWARD_NAME} for example-user (transaction ", run.stdout, run.stdout + run.stderr)
        self.assertIn("impression\n", run.stdout)
