"""Reading the TOML files users write (tolerances, waivers, device profiles).

One place turns every way a file can be unreadable into one QconformError that
names the file, the option it came from and the rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (spec.py and findings.py take tomllib from here)
    import tomli as tomllib  # type: ignore

from suite.core.errors import QconformError


def load_toml(path: str | Path, what: str, option: str, fmt: str | None = None) -> dict[str, Any]:
    """The parsed TOML of ``path``; ``what`` names the file in messages ("tolerance file"),
    ``option`` the command-line option it came from; ``fmt`` checks the ``format`` tag."""
    src = str(path)
    try:
        raw = tomllib.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as e:
        raise QconformError(f"cannot read {what}: {e.strerror}", source=src, field=option) from None
    except UnicodeDecodeError:
        raise QconformError("not UTF-8 text", source=src, rule="TOML syntax") from None
    except tomllib.TOMLDecodeError as e:
        raise QconformError(f"not valid TOML: {e}", source=src, rule="TOML syntax") from None
    except (ValueError, RecursionError) as e:   # a number of > 4300 digits, nesting beyond the stack
        raise QconformError(f"not valid TOML: {str(e).split(';')[0]}", source=src, rule="TOML syntax") from None
    if fmt is not None and raw.get("format") != fmt:
        raise QconformError(f"must be \"{fmt}\" (got {raw.get('format')!r})", source=src,
                            field="format", rule="format tag")
    return raw
