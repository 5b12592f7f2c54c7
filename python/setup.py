"""Packaging hook: copies the libraries built by the repository's `make` (../build/lib) and the
stdlib programs into mscclrt/_libs, so that an installed package finds them beside itself. A
build without them still installs; the package then looks in MSCCLRT_LIB_DIR and the install
prefix, and says where it looked when nothing is found."""
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


setup(cmdclass={"build_py": BuildWithLibraries})
