"""Post-import hooks: run a patch function right after a module is first imported.

The wheel installs `attentionspan_autoregister.pth` into site-packages (see setup.py). At
interpreter start it runs `PTH_LINE`, which only puts a small boot finder at the front of
`sys.meta_path` (a class defined in the line itself, and a copy of the start-up `sys.path`):
no file is read and nothing is imported. The first time a module named in
`POST_IMPORT_HOOKS` is imported, the boot finder locates the installed package with that
start-up path (never the current directory, which Python adds to `sys.path` later), loads
this file from it and calls `arm()`: the real finder takes its place, and right after a
watched module has been imported it calls its "dotted.module:function" with no arguments.
The hook's package is imported from beside this file, by its path (`_import_installed`),
so a folder in the current directory that holds an `attentionspan_datasets/` or
`lm_eval_tasks/` package is never executed. `import attentionspan_datasets` calls `arm()`
too, so editable installs and source checkouts behave the same once the package is imported.

Start-up cost (docs/performance.md): the line runs in about 0.4 ms; Python's own start is
about 10 ms.

Adding a hook is one line in POST_IMPORT_HOOKS, e.g. for lm-eval:

    "lm_eval.tasks": "lm_eval_tasks.registration:register",

Rules the hooks live by:
- cheap at start-up: the .pth line defines one class and copies `sys.path`; this file is
  loaded only when a watched module is imported, and imports only `sys` and `os` (importlib
  and warnings when a hook runs or fails);
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
# exec(). It defines the boot finder and puts it first on sys.meta_path; nothing else. Its
# find_spec answers only for the watched names: it finds the installed package with the
# start-up path, loads startup.py from there, arms the real finder (which removes the boot
# finder) and hands the question on. It uses the import system's own frozen modules (what
# importlib.util re-exports): importing importlib.util costs about 10 ms where site has not
# loaded it. Any failure is a RuntimeWarning, never a broken import. (site runs the line
# with exec() inside a function: the methods see neither its names nor `os`, so they import
# what they use; `sys` is always loaded, so that costs a dictionary look-up.)
_LOAD = (
    "import sys as _s\n"
    "spec = None\n"
    "try:\n"
    "    m = _s.modules.get('attentionspan_datasets.startup')\n"
    "    if m is None:\n"
    "        p = None\n"
    "        for f in _s.meta_path:\n"
    "            if f is not cls and hasattr(f, 'find_spec'):\n"
    "                p = f.find_spec('attentionspan_datasets', cls.path)\n"
    "                if p:\n"
    "                    break\n"
    "        if p and p.submodule_search_locations:\n"
    "            x = _s.modules['_frozen_importlib_external']\n"
    "            i = _s.modules['_frozen_importlib']\n"
    "            f = x._path_join(list(p.submodule_search_locations)[0], 'startup.py')\n"
    "            q = x.spec_from_file_location('attentionspan_datasets.startup', f)\n"
    "            _s.modules[q.name] = m = i.module_from_spec(q)\n"
    "            try:\n"
    "                q.loader.exec_module(m)\n"
    "            except BaseException:\n"
    "                del _s.modules[q.name]\n"
    "                raise\n"
    "    if cls in _s.meta_path:\n"
    "        _s.meta_path.remove(cls)\n"
    "    if m is not None:\n"
    "        m.arm()\n"
    "        f = m._finder()\n"
    "        spec = f.find_spec(name, path, target) if f else None\n"
    "except Exception as e:\n"
    "    if cls in _s.meta_path:\n"
    "        _s.meta_path.remove(cls)\n"
    "    import warnings\n"
    "    warnings.warn(f'attentionspan start-up hook failed ({e!r}); set "
    + ENV_DISABLE
    + "=1 to turn it off', RuntimeWarning)\n"
)
# The line itself only defines the boot finder: compiling it is part of every start-up, so
# the loading code above stays a string constant inside it, compiled on the first hit.
_BOOT = (
    "import sys as _s\n"
    "class _AttnspanBoot:\n"
    "    attentionspan_boot = True\n"
    f"    watch = frozenset({sorted(POST_IMPORT_HOOKS)!r})\n"
    "    path = list(__import__('sys').path)\n"
    "    @classmethod\n"
    "    def find_spec(cls, name, path=None, target=None):\n"
    "        if name in cls.watch:\n"
    "            g = {'cls': cls, 'name': name, 'path': path, 'target': target}\n"
    f"            exec({_LOAD!r}, g)\n"
    "            return g['spec']\n"
    "_s.meta_path.insert(0, _AttnspanBoot)\n"
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

        _import_installed(path.partition(".")[0])
        getattr(importlib.import_module(path), function)()
    except Exception as error:  # never break the host import
        import warnings

        warnings.warn(
            f"attentionspan: post-import hook {target} for {module_name!r} failed: {error!r}; "
            f"set {ENV_DISABLE}=1 to turn the hooks off",
            RuntimeWarning,
            stacklevel=2,
        )


def _import_installed(top: str) -> None:
    """Import the top-level package `top` from beside this file's package (the installed
    copy), by path: a same-named folder in the current directory is never executed. A
    package not found there is left to the normal import."""
    if top in sys.modules:
        return
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), top)
    init = os.path.join(folder, "__init__.py")
    if not os.path.isfile(init):
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location(top, init, submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)
        raise


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
    """Install the finder once (even if this file was loaded twice), in place of the .pth
    line's boot finder, and run the hooks of modules already imported. Returns False when
    turned off by the environment."""
    if disabled():
        return False
    for boot in [f for f in sys.meta_path if getattr(f, "attentionspan_boot", False)]:
        sys.meta_path.remove(boot)
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
