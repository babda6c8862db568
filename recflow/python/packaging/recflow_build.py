"""PEP 517 build backend for recflow's Python package (pyproject.toml).

`pip install --no-build-isolation .` (or `make install-python`) lands here:
the package is built by the same CMake build as `make build` (in build/, or
$RECFLOW_BUILD_DIR), then build/python/recflow and recflow's shared libraries
(as recflow/lib/, which the extension module's RUNPATH $ORIGIN/lib finds) are
packed into a wheel for this interpreter. No network and no build
dependencies beyond the Debian packages scripts/install-deps.sh installs.
"""

import base64
import glob
import hashlib
import io
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
NAME = "recflow"
VERSION = "0.1.0"
SUMMARY = "recflow: train and serve recommendation models; TensorFlow 1.x's graph API in Python"


def _build_dir():
  return os.path.abspath(os.environ.get("RECFLOW_BUILD_DIR") or os.path.join(ROOT, "build"))


def _cmake_build(build_dir):
  if not os.path.exists(os.path.join(build_dir, "build.ninja")):
    subprocess.check_call(["cmake", "-G", "Ninja", "-S", ROOT, "-B", build_dir,
                           "-DCMAKE_BUILD_TYPE=Release"], stdout=sys.stderr)
  subprocess.check_call(["cmake", "--build", build_dir, "--target", "recflow_python", "-j",
                         os.environ.get("RECFLOW_JOBS", "2")], stdout=sys.stderr)


def _tag():
  py = "cp%d%d" % sys.version_info[:2]
  plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
  return py, py, plat


def _metadata():
  return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
          "Requires-Python: >=3.11\nRequires-Dist: numpy\n" % (NAME, VERSION, SUMMARY))


def _wheel_file():
  py, abi, plat = _tag()
  return ("Wheel-Version: 1.0\nGenerator: recflow_build\nRoot-Is-Purelib: false\n"
          "Tag: %s-%s-%s\n" % (py, abi, plat))


def _dist_info():
  return "%s-%s.dist-info" % (NAME, VERSION)


def get_requires_for_build_wheel(config_settings=None):
  return []


def get_requires_for_build_sdist(config_settings=None):
  return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
  path = os.path.join(metadata_directory, _dist_info())
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "METADATA"), "w") as f:
    f.write(_metadata())
  with open(os.path.join(path, "WHEEL"), "w") as f:
    f.write(_wheel_file())
  return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
  build_dir = _build_dir()
  _cmake_build(build_dir)
  files = []  # (archive name, source path)
  package_dir = os.path.join(build_dir, "python", "recflow")
  for dirpath, dirnames, filenames in os.walk(package_dir):
    dirnames[:] = [d for d in dirnames if d != "__pycache__"]
    for name in sorted(filenames):
      if name.endswith((".py", ".so")):
        src = os.path.join(dirpath, name)
        files.append((os.path.join("recflow", os.path.relpath(src, package_dir)), src))
  libs = sorted(glob.glob(os.path.join(build_dir, "lib", "librecflow_*.so")))
  if not libs:
    raise RuntimeError("no recflow libraries in %s/lib" % build_dir)
  files += [(os.path.join("recflow", "lib", os.path.basename(p)), p) for p in libs]
  py, abi, plat = _tag()
  wheel_name = "%s-%s-%s-%s-%s.whl" % (NAME, VERSION, py, abi, plat)
  record = []
  os.makedirs(wheel_directory, exist_ok=True)
  with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                       zipfile.ZIP_DEFLATED) as whl:
    def add(arcname, data, executable=False):
      info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
      info.external_attr = (0o755 if executable else 0o644) << 16
      info.compress_type = zipfile.ZIP_DEFLATED
      whl.writestr(info, data)
      digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
      record.append("%s,sha256=%s,%d" % (arcname, digest.decode(), len(data)))

    for arcname, src in files:
      with open(src, "rb") as f:
        add(arcname, f.read(), executable=src.endswith(".so"))
    add(_dist_info() + "/METADATA", _metadata().encode())
    add(_dist_info() + "/WHEEL", _wheel_file().encode())
    record.append(_dist_info() + "/RECORD,,")
    whl.writestr(_dist_info() + "/RECORD", "\n".join(record) + "\n")
  return wheel_name


def build_sdist(sdist_directory, config_settings=None):
  """The git-tracked sources (a wheel build needs the whole C++ tree)."""
  base = "%s-%s" % (NAME, VERSION)
  names = subprocess.check_output(["git", "-C", ROOT, "ls-files"], text=True).split()
  os.makedirs(sdist_directory, exist_ok=True)
  path = os.path.join(sdist_directory, base + ".tar.gz")
  with tarfile.open(path, "w:gz") as tar:
    for name in names:
      tar.add(os.path.join(ROOT, name), arcname=os.path.join(base, name))
    info = tarfile.TarInfo(os.path.join(base, "PKG-INFO"))
    data = _metadata().encode()
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
  return base + ".tar.gz"
