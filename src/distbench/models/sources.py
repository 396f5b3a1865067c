"""The user's own models: a factory function, a saved ``.keras`` file, keras.applications.

Each builder returns a Keras 3 model for one sample shape and a number of classes, or
raises :class:`~distbench.config.ConfigError` with one line naming the source, what
went wrong and how to fix it. Every process of a run calls the same builder with the
same :class:`~distbench.config.ModelConfig` and then loads the workload's initial
weights, so only the architecture has to be the same everywhere.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from distbench.config import APPLICATIONS, ConfigError

FACTORY_HINT = ("run distbench from the folder that holds the module's top package, set [model] factory_dir = "
                "'that folder', put it on PYTHONPATH, or install the package (README, 'Your own model')")


def import_factory(factory: str, folder: str = "") -> Any:
    """Import the function named by ``"package.module:function"``.

    The module is looked up on ``sys.path``, then in ``folder`` (``[model] factory_dir``, the
    folder it was found in when the run was configured) and in the current directory (both
    appended to ``sys.path`` if missing, as ``python -m`` puts the current one first), so a
    module under the folder distbench was first run from is found in every process of the
    run, and by every later command from any folder.

    Raises:
        ConfigError: not of the form ``module:function``, the module cannot be imported
            (missing, or its import raised), no such attribute, or not callable.
    """
    mod_name, sep, attr = factory.partition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(f"model.factory = {factory!r}: expected 'package.module:function', "
                          "e.g. \"examples.my_model:build\"")
    if mod_name.endswith(".py"):  # a file name where Python wants a module name
        module = mod_name[:-3].replace(os.sep, ".").lstrip(".")
        raise ConfigError(f"model.factory = {factory!r}: {mod_name!r} is a file name; name the module as Python "
                          f"imports it: \"{module}:{attr}\" (from the folder you run distbench in)")
    for where in (folder, os.getcwd()):
        if where and where not in sys.path:
            sys.path.append(where)
    try:
        obj: Any = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        mine = e.name is None or mod_name == e.name or mod_name.startswith(e.name + ".")
        if not mine:  # the module was found; one of its own imports was not
            raise ConfigError(f"model.factory = {factory!r}: module {mod_name!r} imports {e.name!r}, which is not "
                              f"installed in the environment distbench runs in ({sys.executable}); install it "
                              "there (on every host of a cluster)") from None
        raise ConfigError(f"model.factory = {factory!r}: cannot import module {mod_name!r} ({e}); "
                          f"{FACTORY_HINT}") from None
    except Exception as e:  # noqa: BLE001 - the user's module: any error at import is reported
        raise ConfigError(f"model.factory = {factory!r}: importing module {mod_name!r} raised "
                          f"{type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"model.factory = {factory!r}: {_no_such_function(obj, part)}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"model.factory = {factory!r}: {attr!r} is {_a(type(obj).__name__)}, not a function "
                          "(input_shape, num_classes) -> keras.Model")
    return obj


def _a(name: str) -> str:
    """``name`` with its article: ``an int``, ``a list``."""
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _returned(obj: Any) -> str:
    """What a factory returned, for its error: ``None``, else ``a <module>.<class>``
    (``a list`` for builtins)."""
    if obj is None:
        return "None"
    t = type(obj)
    return _a(t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}")


def _no_such_function(obj: Any, name: str) -> str:
    """Why ``name`` is not found in module (or object) ``obj``: a close name if there is one,
    and the functions and classes it defines itself (imported modules and names left out)."""
    import difflib
    import types

    public = {n: v for n, v in vars(obj).items() if not n.startswith("_") and callable(v)
              and not isinstance(v, types.ModuleType)} if hasattr(obj, "__dict__") else {}
    own = sorted(n for n, v in public.items() if getattr(v, "__module__", None) == getattr(obj, "__name__", None))
    names = own or sorted(public)
    close = difflib.get_close_matches(name, names, n=1)
    where = getattr(obj, "__name__", type(obj).__name__)
    text = f"{'module ' if isinstance(obj, types.ModuleType) else ''}{where!r} has no attribute {name!r}"
    if close:
        text += f"; did you mean {close[0]!r}?"
    listed = ", ".join(names)
    return text + (f" (it defines: {listed[:200]}{'...' if len(listed) > 200 else ''})" if names
                   else " (it defines no functions or classes)")


def from_factory(factory: str, input_shape: tuple[int, ...], num_classes: int, folder: str = "") -> Any:
    """Call the user's factory ``(input_shape, num_classes) -> keras.Model`` (imported with
    :func:`import_factory` from ``folder``, ``[model] factory_dir``).

    Raises:
        ConfigError: see :func:`import_factory`; the factory raised; it returned
            something that is not a ``keras.Model``.
    """
    import keras

    fn = import_factory(factory, folder)
    try:
        model = fn(tuple(input_shape), int(num_classes))
    except Exception as e:  # noqa: BLE001 - the user's code: any error is reported with its type
        raise ConfigError(f"model.factory = {factory!r} raised {type(e).__name__} for input_shape="
                          f"{tuple(input_shape)}, num_classes={num_classes}: {e}") from None
    if not isinstance(model, keras.Model):
        raise ConfigError(f"model.factory = {factory!r} returned {_returned(model)}, "
                          "expected an uncompiled keras.Model (Keras 3: keras.Model / keras.Sequential)")
    return model


def from_file(path: str, reinit: bool) -> Any:
    """Load a saved Keras 3 model (``compile=False``); with ``reinit``, a copy of its
    architecture whose initializers run again (seeded by ``keras.utils.set_random_seed``).

    Raises:
        ConfigError: the file is missing, not a Keras model, or holds custom objects
            Keras cannot rebuild.
    """
    import keras

    if not os.path.isfile(path):
        raise ConfigError(f"model.path = {path!r}: no such file on {os.uname().nodename}; every process "
                          "loads it: put it at the same path on every host")
    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as e:  # noqa: BLE001 - whatever Keras says about the file
        msg = " ".join(str(e).split())[:300].rstrip(".")
        if msg.startswith("File not found"):  # Keras says so of an existing file that is not a .keras zip
            msg = "the file exists but is not a .keras zip archive (Keras reports: File not found)"
        raise ConfigError(f"model.path = {path!r} is not a loadable Keras 3 model ({type(e).__name__}: {msg}); "
                          "save one with model.save(\"model.keras\")") from None
    if not isinstance(model, keras.Model):
        raise ConfigError(f"model.path = {path!r} holds a {type(model).__name__}, not a keras.Model")
    return keras.models.clone_model(model) if reinit else model


def from_application(name: str, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """A keras.applications model: ``weights=None``, the data's ``input_shape`` and
    ``classes``, logits output (``classifier_activation=None``) and, where the model
    has one, no built-in input rescaling (distbench's images are already in [0, 1]).

    Raises:
        ConfigError: unknown name, or the application cannot take the data's shape
            (most need inputs of at least 32x32; InceptionV3 75x75, Xception 71x71).
    """
    import keras

    if name not in APPLICATIONS:
        raise ConfigError(f"model.name = {name!r}: not a keras.applications model; expected one of "
                          + ", ".join(APPLICATIONS))
    cls = getattr(keras.applications, APPLICATIONS[name])
    kwargs: dict[str, Any] = {"weights": None, "input_shape": tuple(input_shape), "classes": int(num_classes),
                              "classifier_activation": None}
    if "include_preprocessing" in inspect.signature(cls).parameters:
        kwargs["include_preprocessing"] = False
    try:
        return cls(**kwargs)
    except ValueError as e:
        msg = " ".join(str(e).split())[:300].rstrip(".")
        raise ConfigError(f"model.name = {name!r} (keras.applications.{APPLICATIONS[name]}) cannot take the data's "
                          f"input shape {tuple(input_shape)}: {msg}; use data with larger images or another "
                          "model") from None
