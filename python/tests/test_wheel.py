"""make wheel's wheel, installed into a fresh venv: spindle on PATH, import spindle, one version, the README's example.

Builds the wheel with scripts/build-wheel.sh (needs go), installs it with
pip into a venv made from /usr/bin/python3 with --system-site-packages (so
Debian's torch and numpy are there, as a user's environment would have
them), and runs the README's PyTorch example with that venv's spindle and
python alone. Slow (a build and a two-rank job): set SPINDLE_SKIP_WHEEL=1
to skip it.
"""

import glob
import os
import platform
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile

import support

SYSTEM_PYTHON = "/usr/bin/python3"


def has_torch():
    return subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


@unittest.skipIf(os.environ.get("SPINDLE_SKIP_WHEEL"), "SPINDLE_SKIP_WHEEL is set")
@unittest.skipIf(shutil.which("go") is None, "needs go to build the wheel's binary")
@unittest.skipIf(not os.access(SYSTEM_PYTHON, os.X_OK), "needs /usr/bin/python3")
class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="spindle-wheel-")
        out = os.path.join(cls.tmp, "dist")
        subprocess.run([os.path.join(support.REPO_DIR, "scripts", "build-wheel.sh")], check=True,
                       # -trimpath, as make test's builds are: it reuses their compiled packages.
                       env=dict(os.environ, OUT=out), cwd=support.REPO_DIR,
                       stdout=subprocess.DEVNULL)
        (cls.wheel,) = glob.glob(os.path.join(out, "*.whl"))
        cls.venv = os.path.join(cls.tmp, "venv")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", cls.venv], check=True)
        subprocess.run([os.path.join(cls.venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-index",
                        "--disable-pip-version-check", cls.wheel], check=True)
        # The venv alone: its bin first, no checkout on PYTHONPATH.
        cls.env = dict(os.environ, PATH=os.path.join(cls.venv, "bin") + os.pathsep + "/usr/bin:/bin",
                       SPINDLE_CONF_DIR="")
        cls.env.pop("PYTHONPATH", None)
        cls.env.pop("SPINDLE_BINARY", None)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_venv(self, *args, **kw):
        return subprocess.run(list(args), env=self.env, cwd=self.tmp, capture_output=True, text=True, **kw)

    def test_name_and_platform_tag(self):
        arch = {"x86_64": "x86_64", "aarch64": "aarch64"}[platform.machine()]
        self.assertRegex(os.path.basename(self.wheel), r"^spindle_ml-[0-9][^-]*-py3-none-manylinux_2_\d+_" + arch + r"\b")
        with zipfile.ZipFile(self.wheel) as z:
            names = z.namelist()
            info = z.getinfo(next(n for n in names if n.endswith(".data/scripts/spindle")))
        self.assertTrue((info.external_attr >> 16) & 0o111, "the binary is not executable in the wheel")
        self.assertIn("spindle/__init__.py", names)
        self.assertIn("spindle/jars/spindle-spark.jar", names)
        self.assertTrue(any(n.endswith(".dist-info/RECORD") for n in names))

    def test_spark_pusher_jar_installed(self):
        py = self.run_venv("python", "-c", "import zipfile, spindle.spark as s; p = s.jar_path(); print(p); "
                           "print('ml/spindle/spark/Push.class' in zipfile.ZipFile(p).namelist())")
        self.assertEqual(py.returncode, 0, py.stderr)
        path, has_pusher = py.stdout.split()
        self.assertTrue(path.startswith(self.venv), f"spindle.spark.jar_path() is {path}, not in the venv")
        self.assertEqual(has_pusher, "True", f"{path} holds no ml.spindle.spark.Push")

    def test_spindle_on_path_and_one_version(self):
        self.assertEqual(shutil.which("spindle", path=self.env["PATH"]), os.path.join(self.venv, "bin", "spindle"))
        got = self.run_venv("spindle", "version")
        self.assertEqual(got.returncode, 0, got.stderr)
        py = self.run_venv("python", "-c", "import spindle; print(spindle.__version__); print(spindle.__file__)")
        self.assertEqual(py.returncode, 0, py.stderr)
        version, path = py.stdout.split()
        self.assertTrue(path.startswith(self.venv), f"import spindle found {path}, not the venv's")
        self.assertTrue(got.stdout.startswith(f"spindle {version} "), f"spindle version says {got.stdout!r}, the package {version}")

    @unittest.skipIf(not has_torch(), "needs Debian's python3-torch (make deps)")
    def test_readme_pytorch_example(self):
        data = os.path.join(self.tmp, "data")
        subprocess.run(["go", "run", "./examples/datagen", "--out", data, "--rows", "4000", "--features", "16",
                        "--files", "2", "--row-group-rows", "1000", "--format", "parquet", "--seed", "7"],
                       cwd=support.REPO_DIR, check=True, capture_output=True)
        train = os.path.join(support.REPO_DIR, "examples", "pytorch", "train.py")
        got = self.run_venv("spindle", "submit", "--master", "local[2]", "--input", os.path.join(data, "*.parquet"),
                            "--label-column", "label", "--feed", "tensor", "--batch-rows", "256", "--epochs", "2",
                            "--shuffle", "--", "python", train, timeout=support.scaled(600))
        self.assertEqual(got.returncode, 0, got.stderr[-3000:])
        finals = re.findall(r"final rank=(\d) .*params_sha256=([0-9a-f]{64})", got.stdout)
        self.assertEqual(sorted(r for r, _ in finals), ["0", "1"], got.stdout[-2000:])
        self.assertEqual(len({h for _, h in finals}), 1, "the ranks ended with different models")


if __name__ == "__main__":
    unittest.main()
