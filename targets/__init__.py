"""Targets: one module per target behind :class:`targets.base.Target`, registered by name.

``get_target("htp")`` returns an instance; ``--target=package.module:Class`` loads a
user's own target class, and installed packages can register targets under the
``qconform.targets`` entry-point group.
"""

from __future__ import annotations

import difflib
import importlib
import re
import traceback
from importlib.metadata import entry_points
from typing import Any

from suite.core.errors import QconformError

from targets.base import Outcome, Target, Timing, latency_stats  # noqa: F401

#: name -> "module:Class"; imported only when used, so a missing runtime skips one target
BUILTIN: dict[str, str] = {
    "ref": "targets.ref:RefTarget",
    "tflite": "targets.tflite:TfliteTarget",
    "tflite-ref": "targets.tflite:TfliteRefTarget",
    "ort": "targets.ort:OrtTarget",
    "htp": "targets.htp:HtpTarget",
    "tflm": "targets.tflm:TflmTarget",
    "openvino": "targets.openvino:OpenvinoTarget",
    "tosa": "targets.tosa:TosaTarget",
    "netrun": "targets.netrun:NetrunTarget",   # needs --netrun-profile (docs/devices.md)
}

#: what `pytest` with no --target runs (each only if available)
DEFAULT_TARGETS = ["ref", "tflite", "tflite-ref", "ort", "htp", "tflm", "openvino", "tosa"]

ENTRY_POINT_GROUP = "qconform.targets"

DEFAULT_NAME = "target"   # Target.name of a class that sets none
#: a target's name heads its rows, test ids (``<case id>:<name>``) and failure folder
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
NAME_RULE = "a target name is 1 to 64 of [A-Za-z0-9._+-], starting with a letter or digit"


def _entry_points() -> dict[str, Any]:
    try:
        return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:
        return {}


def known_names() -> list[str]:
    return list(BUILTIN) + [n for n in _entry_points() if n not in BUILTIN]


def load_class(spec: str) -> type[Target]:
    """Resolve a target name, an entry point, or ``module:Class`` to a Target class."""
    if spec in BUILTIN:
        path = BUILTIN[spec]
    elif ":" in spec:
        path = spec
    else:
        eps = _entry_points()
        if spec in eps:
            try:
                cls = eps[spec].load()
            except Exception as e:
                raise QconformError(f"cannot load entry point '{spec}' ({eps[spec].value}): {_where(e)}",
                                    field="--target", rule="entry points must be importable") from None
            return _check_class(cls, spec)
        close = difflib.get_close_matches(spec, known_names(), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise QconformError(f"unknown target '{spec}' ({hint}known: {', '.join(known_names())}; "
                            f"or module:Class for your own)", field="--target", rule="target name")
    mod_name, _, cls_name = path.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise QconformError(f"cannot import module '{mod_name}' for target '{spec}': {e}",
                            field="--target", rule="module:Class must be importable") from None
    except Exception as e:   # the user's module itself raised (SyntaxError, NameError, ...)
        raise QconformError(f"importing module '{mod_name}' for target '{spec}' failed: {_where(e)}",
                            field="--target", rule="module:Class must be importable") from None
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise QconformError(f"module '{mod_name}' has no class '{cls_name}'", field="--target",
                            rule="module:Class must name a class")
    return _check_class(cls, spec)


def _where(e: Exception) -> str:
    """``Type: message`` and the innermost frame (file:line) where ``e`` was raised."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<frozen")]
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames and not isinstance(e, SyntaxError) else ""
    return f"{type(e).__name__}: {e}{at}"


def _check_class(cls, spec) -> type[Target]:
    if not (isinstance(cls, type) and issubclass(cls, Target)):
        if not (isinstance(cls, type) and (hasattr(cls, "run_one") or hasattr(cls, "run"))):
            raise QconformError(f"'{spec}' is not a target class (subclass targets.base.Target "
                                f"and implement run_one)", field="--target", rule="target interface")
    return cls


def target_name(spec: str) -> str:
    """The name rows, test ids and the summary give the target ``--target=spec`` selects: a
    built-in's or an entry point's name as given; for ``module:Class``, the class's own ``name``
    when it sets one (else the spec). A name that is not safe, or that another target has, is
    a QconformError (field --target)."""
    if spec in BUILTIN or ":" not in spec:
        return spec
    cls = load_class(spec)
    name = getattr(cls, "name", DEFAULT_NAME)
    if name == DEFAULT_NAME:
        return spec
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise QconformError(f"'{spec}' has name {name!r}", field="--target", rule=NAME_RULE)
    owner = {**BUILTIN, **{n: ep.value for n, ep in _entry_points().items()}}.get(name)
    if owner is not None and owner != f"{cls.__module__}:{cls.__qualname__}":
        raise QconformError(f"'{spec}' has name '{name}', the name of the target {owner}: set another "
                            f"`name` in the class", field="--target", rule="one name, one target")
    return name


def get_target(spec: str, **options: Any) -> Target:
    """The target ``spec`` selects; its ``name`` is :func:`target_name`, its ``selector`` the
    ``--target`` value that selects it again (a repro command's)."""
    cls = load_class(spec)
    t = cls(**options)
    if spec not in BUILTIN and ":" in spec:
        t.name = target_name(spec)
    t.selector = spec
    return t


def parse_target_list(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        for part in v.split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out
