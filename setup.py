"""Build hook only (metadata lives in pyproject.toml): ship the csrc/ tree inside the wheel as
hisparse/_csrc, where hisparse.env.CSRC_DIR looks for it in an installed (non-editable) package, and
configs/*.yaml as hisparse/configs, the last of hisparse.env.CONFIG_DIRS (so `hisparse-bench run`
finds its configs outside a checkout). An editable install needs neither: both are found in the
checkout there."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_SKIP_SUFFIXES = {".o", ".so", ".pyc"}  # build products, never sources
_ROOT = Path(__file__).resolve().parent


def _copy_tree(src: Path, dst: Path, pattern: str) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"{src} missing: the sdist must include {src.name}/ (MANIFEST.in)")
    for f in sorted(src.rglob(pattern)):
        if f.is_file() and f.suffix not in _SKIP_SUFFIXES and "__pycache__" not in f.parts:
            out = dst / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, out)


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        pkg = Path(self.build_lib) / "hisparse"
        _copy_tree(_ROOT / "csrc", pkg / "_csrc", "*")
        _copy_tree(_ROOT / "configs", pkg / "configs", "*.yaml")


setup(cmdclass={"build_py": build_py_with_data})
