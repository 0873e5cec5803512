"""Build hook only; the metadata lives in setup.cfg.

The wheel carries `attentionspan_autoregister.pth` at the top of site-packages so that
`load_dataset("attentionspan", ...)` works without importing anything first (see
attentionspan_datasets/startup.py). setuptools has no option for a file outside a package,
so build_py writes it next to the packages; its text is `startup.PTH_LINE`, read from the
source file without importing the package.
"""

import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py


def _startup_module():
    path = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "attentionspan_datasets", "startup.py"
    )
    spec = importlib.util.spec_from_file_location("_attentionspan_startup_for_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        startup = _startup_module()
        with open(self._pth_path(), "w", encoding="utf-8") as handle:
            handle.write(startup.PTH_LINE)

    def _pth_path(self):
        folder = self.build_lib
        if getattr(self, "editable_mode", False):
            # `pip install -e`: editable_wheel packs its unpacked wheel (install_lib) as is,
            # while build_lib is thrown away.
            folder = self.get_finalized_command("install").install_lib
        return os.path.join(folder, _startup_module().PTH_NAME)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), self._pth_path()]


setup(cmdclass={"build_py": BuildPyWithPth})
