"""Packaging hook: copies the libraries built by the repository's `make` (../build/lib) and the
stdlib programs into mscclrt/_libs, so that an installed package finds them beside itself. A
build without them still installs; the package then looks in MSCCLRT_LIB_DIR and the install
prefix, and says where it looked when nothing is found. Wheels are tagged for the platform
(py3-none-linux_x86_64), since they carry the machine code of those libraries."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LIBS = ["libmscclrt.so.0", "libmscclc.so.0", "libmscclrt_nccl.so"]


class BuildWithLibraries(build_py):
    def run(self):
        super().run()
        dest = Path(self.build_lib) / "mscclrt" / "_libs"
        built = REPO / "build" / "lib"
        found = [n for n in LIBS if (built / n).exists()]
        if found:
            dest.mkdir(parents=True, exist_ok=True)
            for n in found:
                shutil.copy2(built / n, dest / n)
            self.announce(f"mscclrt: bundled {', '.join(found)} from {built}", level=2)
        else:
            self.announce(f"mscclrt: no built libraries in {built}: the package will look in "
                          "MSCCLRT_LIB_DIR and the install prefix", level=2)
        stdlib = REPO / "stdlib"
        if stdlib.is_dir():
            shutil.copytree(stdlib, dest / "stdlib", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.md"))


# The bundled libraries are x86-64 (or whatever `make` built) machine code, loaded through ctypes:
# the wheel is for this platform, but for any Python 3 (no extension module, no Python ABI), so
# its tag is py3-none-<platform> rather than the pure py3-none-any.
try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:   # setuptools < 70.1: the wheel package's
    try:
        from wheel.bdist_wheel import bdist_wheel as _bdist_wheel
    except ImportError:
        _bdist_wheel = None

cmdclass = {"build_py": BuildWithLibraries}
if _bdist_wheel is not None:
    class PlatformWheel(_bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass)
