"""The import-cycle check `make lint` runs (tools/import_cycles.py): it finds rings among sibling
modules, through re-exports and function-local imports, and the repository has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "import_cycles.py"


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_repository_has_no_import_cycles():
    result = run()
    assert result.returncode == 0, result.stdout
    assert "no import cycles" in result.stdout


def test_rings_through_re_exports_and_function_local_imports_are_found(tmp_path):
    rust, python = tmp_path / "src", tmp_path / "pkg"
    write(
        rust,
        {
            "lib.rs": "pub mod error;\npub mod store;\npub mod window;\n",
            "error.rs": "use crate::store::StoreError;\npub enum Error { Store(StoreError) }\n",
            # store/mod.rs re-exports its child's type; array names the root error.
            "store/mod.rs": "mod array;\nmod failure;\npub use failure::StoreError;\n",
            "store/failure.rs": "pub struct StoreError;\n",
            "store/array.rs": "use crate::error::Error;\nuse super::StoreError;\n",
            "window.rs": "// crate::error in a comment is not a dependency\n",
        },
    )
    write(
        python,
        {
            "__init__.py": "",
            "a.py": "from .b import thing\n",
            "b.py": "def thing():\n    from .a import other  # hidden in a function\n    return other\n",
            "c.py": "from . import a\n",
        },
    )
    result = run(rust, python)
    assert result.returncode == 1
    assert "rust cycle: error <-> store" in result.stdout
    assert "window" not in result.stdout
    assert "python cycle: pkg.a <-> pkg.b" in result.stdout
    assert "pkg.c" not in result.stdout
