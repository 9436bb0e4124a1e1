"""`pip install` of the package into a fresh venv gives a working `import adorch`, offline: the
system's setuptools and wheel build it (a venv with the system site packages, no build
isolation, no index; scripts/install-deps.sh installs them)."""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


class InstallTests(unittest.TestCase):
    def test_pip_install_into_a_fresh_venv(self) -> None:
        with tempfile.TemporaryDirectory(prefix="adorch-venv-") as venv, tempfile.TemporaryDirectory() as build:
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True, capture_output=True)
            python = str(Path(venv) / "bin" / "python")
            # Not the repository's copy, which the tests themselves import through PYTHONPATH.
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            # A copy to build from, so the build leaves nothing in the repository.
            source = Path(build) / "adorch"
            subprocess.run(["cp", "-r", str(PACKAGE), str(source)], check=True)
            pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation",
                                  "--disable-pip-version-check", str(source)], capture_output=True, text=True, env=env)
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            check = subprocess.run([python, "-c", "import adorch, pathlib; "
                                    "print(adorch.__file__); print(adorch.Client.__name__, adorch.NoAdReady.__name__); "
                                    "print((pathlib.Path(adorch.__file__).parent / 'py.typed').exists())"],
                                   capture_output=True, text=True, cwd=build, env=env)
            self.assertEqual(check.returncode, 0, check.stderr)
            where, names, typed = check.stdout.split("\n")[:3]
            self.assertTrue(where.startswith(venv), where)
            self.assertEqual(names, "Client NoAdReady")
            self.assertEqual(typed, "True", "py.typed is installed")
