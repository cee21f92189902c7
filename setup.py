"""Build hook only (metadata lives in pyproject.toml): ship the csrc/ tree inside the wheel as
hisparse/_csrc, where hisparse.env.CSRC_DIR looks for it in an installed (non-editable) package.
An editable install needs nothing: env.CSRC_DIR is <repo>/csrc there."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_SKIP_SUFFIXES = {".o", ".so", ".pyc"}  # build products, never sources


class build_py_with_csrc(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        src = Path(__file__).resolve().parent / "csrc"
        if not src.is_dir():
            raise FileNotFoundError(f"{src} missing: the sdist must include csrc/ (MANIFEST.in)")
        dst = Path(self.build_lib) / "hisparse" / "_csrc"
        for f in sorted(src.rglob("*")):
            if f.is_file() and f.suffix not in _SKIP_SUFFIXES and "__pycache__" not in f.parts:
                out = dst / f.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, out)


setup(cmdclass={"build_py": build_py_with_csrc})
