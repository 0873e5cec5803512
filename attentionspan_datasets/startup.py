"""Post-import hooks: run a patch function right after a module is first imported.

The wheel installs `attentionspan_autoregister.pth` into site-packages (see setup.py). At
interpreter start it runs `PTH_LINE`, which loads this file alone (it does not import the
attentionspan_datasets package, datasets or anything else) and calls `arm()`: a finder at
the front of `sys.meta_path` waits for the modules named in `POST_IMPORT_HOOKS` and, right
after one of them has been imported, calls its "dotted.module:function" with no arguments.
`import attentionspan_datasets` calls `arm()` too, so editable installs and source checkouts
behave the same once the package is imported.

Adding a hook is one line in POST_IMPORT_HOOKS, e.g. for lm-eval:

    "lm_eval.tasks": "lm_eval_tasks.registration:register",

Rules the hooks live by:
- cheap at start-up: this file imports only `sys` and `os`; importlib and warnings are
  imported when a hook runs or fails;
- a hook never breaks the host import: the module is imported exactly as without us, and an
  exception from the patch function becomes a RuntimeWarning;
- `ATTENTIONSPAN_NO_AUTOREGISTER=1` turns all of it off (the .pth, and the arming on package
  import); explicit calls such as `attentionspan_datasets.registration.register()` still work.
- a module that is already imported when `arm()` runs gets its hook at once.
"""

import os
import sys

ENV_DISABLE = "ATTENTIONSPAN_NO_AUTOREGISTER"

# {imported module: "dotted.module:function"}; the function runs right after the import.
POST_IMPORT_HOOKS: dict[str, str] = {
    "datasets": "attentionspan_datasets.registration:register",
    "lm_eval.tasks": "lm_eval_tasks.registration:patch_task_manager",
    "lm_eval.api.registry": "lm_eval_tasks.registration:register_model_type",
}

PTH_NAME = "attentionspan_autoregister.pth"

# Executed by `site` for each start-up: a .pth line that starts with "import" is run with
# exec(). It finds the installed package without importing it, loads this file under its
# own name and arms the hooks; any failure is a warning, never a broken interpreter. It uses
# the import system's own frozen modules (what importlib.util re-exports): importing
# importlib.util would cost about 10 ms per start-up where site has not loaded it.
_BOOT = (
    "_p = None\n"
    "try:\n"
    "    import sys as _s\n"
    "    _x = _s.modules['_frozen_importlib_external']\n"
    "    _i = _s.modules['_frozen_importlib']\n"
    "    for _f in _s.meta_path:\n"
    "        _p = hasattr(_f, 'find_spec') and _f.find_spec('attentionspan_datasets', None)\n"
    "        if _p:\n"
    "            break\n"
    "    if _p and _p.submodule_search_locations and"
    " 'attentionspan_datasets.startup' not in _s.modules:\n"
    "        _f = os.path.join(list(_p.submodule_search_locations)[0], 'startup.py')\n"
    "        _m = _x.spec_from_file_location('attentionspan_datasets.startup', _f)\n"
    "        _s.modules[_m.name] = _o = _i.module_from_spec(_m)\n"
    "        _m.loader.exec_module(_o)\n"
    "        _o.arm()\n"
    "except Exception as _e:\n"
    "    import warnings as _w\n"
    "    _w.warn(f'attentionspan start-up hook failed ({_e!r}); set "
    + ENV_DISABLE
    + "=1 to turn it off', RuntimeWarning)\n"
)
PTH_LINE = f"import os; os.environ.get({ENV_DISABLE!r}) or exec({_BOOT!r})\n"


def disabled() -> bool:
    return bool(os.environ.get(ENV_DISABLE))


def run_hook(module_name: str) -> None:
    """Call the hook of `module_name`; an exception becomes a RuntimeWarning."""
    target = POST_IMPORT_HOOKS.get(module_name)
    if not target or disabled():
        return
    path, _, function = target.partition(":")
    try:
        import importlib

        getattr(importlib.import_module(path), function)()
    except Exception as error:  # never break the host import
        import warnings

        warnings.warn(
            f"attentionspan: post-import hook {target} for {module_name!r} failed: {error!r}; "
            f"set {ENV_DISABLE}=1 to turn the hooks off",
            RuntimeWarning,
            stacklevel=2,
        )


class _HookedLoader:
    """Runs the real loader, then the hook; everything else is the real loader's."""

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        self._loader.exec_module(module)  # an error here is the host's, raised as usual
        # From now on the module shows its own loader, as if we had never been there.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        run_hook(module.__name__)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._loader, name)


class _PostImportFinder:
    """A meta-path finder that finds nothing itself: it wraps the loader of a watched module."""

    attentionspan_post_import_hooks = True  # how arm() recognises an installed finder

    def __init__(self) -> None:
        self._searching = set()

    def find_spec(self, fullname: str, path=None, target=None):  # noqa: ANN001, ANN201
        if fullname not in POST_IMPORT_HOOKS or fullname in self._searching or disabled():
            return None
        import importlib.util

        self._searching.add(fullname)  # the search below must not find us again
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader)
        return spec


def _finder() -> _PostImportFinder | None:
    for finder in sys.meta_path:
        if getattr(finder, "attentionspan_post_import_hooks", False):
            return finder
    return None


def arm() -> bool:
    """Install the finder once (even if this file was loaded twice) and run the hooks of
    modules already imported. Returns False when turned off by the environment."""
    if disabled():
        return False
    if _finder() is None:
        sys.meta_path.insert(0, _PostImportFinder())
    for name in POST_IMPORT_HOOKS:
        if name in sys.modules:
            run_hook(name)
    return True


def disarm() -> None:
    """Remove the finder (the patches already made stay)."""
    finder = _finder()
    while finder is not None:
        sys.meta_path.remove(finder)
        finder = _finder()
