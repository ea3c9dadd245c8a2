"""The code a module runs (`ledger.codeclosure.closure`), which keys the caches that only it fills:
every way the package imports is followed, and the closure holds at least what Python loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ledger as ledger_package
from ledger.cache import _package_files
from ledger.codeclosure import closure

SOURCES = {
    "ledger": b"",
    "ledger.a": b"from ledger.b import thing\n",
    "ledger.b": b"def thing():\n    from ledger.pkg import inner\n    return inner\n",
    "ledger.pkg": b"",
    "ledger.pkg.inner": b"from . import sibling\nfrom .deep import x\n",
    "ledger.pkg.sibling": b"LAZY = ('ledger.lazy', 'ledger.byname:main')\n",
    "ledger.pkg.deep": b"import ledger.typed\n",
    "ledger.lazy": b"",
    "ledger.byname": b"",
    "ledger.typed": b"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ledger.hinted import Hint\n",
    "ledger.hinted": b"",
    "ledger.untouched": b"import ledger.a\n",
}


def test_every_kind_of_import_is_followed_and_nothing_else() -> None:
    """A function's import, relative ones, a submodule imported by `from`, a module named in a
    string (a lazy import by name, `module:attribute`), a `TYPE_CHECKING` import; never a module
    that only imports the root."""
    assert closure(SOURCES, ["ledger.a"]) == set(SOURCES) - {"ledger.untouched"}


def test_a_name_inside_a_module_is_that_module() -> None:
    assert closure(SOURCES, ["ledger.pkg.sibling.LAZY"]) == {"ledger", "ledger.pkg", "ledger.pkg.sibling", "ledger.lazy", "ledger.byname"}


def _package_sources() -> dict[str, bytes]:
    root = Path(ledger_package.__file__).parent
    out = {}
    for rel, entry in _package_files(root):
        if rel.endswith(".py"):
            name = ".".join(["ledger", *rel.removesuffix(".py").split("/")]).removesuffix(".__init__")
            out[name] = Path(entry.path).read_bytes()
    return out


@pytest.mark.parametrize("module", ["ledger.storage.listing", "ledger.configload", "ledger.capture.hostfacts", "ledger.redact.catalogue"])
def test_the_closure_holds_what_python_loads(module: str) -> None:
    """Checked against the interpreter itself: every ledger module that importing `module` (and
    calling nothing) loads is in its closure."""
    probe = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m == 'ledger' or m.startswith('ledger.')))"
    loaded = set(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split())
    assert module in loaded
    assert loaded <= closure(_package_sources(), [module])


def test_the_listing_code_leaves_out_what_it_never_runs() -> None:
    """What makes the index survive an upgrade: the heat guard, the recording pipeline and the
    comparison are outside the listing's code; the cells' text is inside."""
    run = closure(_package_sources(), ["ledger.storage.listing"])
    assert {"ledger.storage.listrow", "ledger.storage.coldread", "ledger.termstyle", "ledger.textfmt"} <= run
    assert not run & {"ledger.heat.guard", "ledger.record.run", "ledger.compare.diffcore", "ledger.cli"}
