"""Write hangdbg/catalog/data/catalog.json, the JSON twin of the catalog's TOML files.

The TOML files are the catalog's source (reviewed, commented, written by the miners); the twin holds
the same parsed documents with the SHA-256 of the TOML files (:func:`hangdbg.catalog.catalog.toml_digest`),
so that loading the catalog takes ``json`` time instead of ``tomllib`` time. A stale twin is never used
(``load`` parses the TOML files then) and a test fails until this script is run again.

    python scripts/catalog/json_twin.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hangdbg.catalog.catalog import TWIN, data_files, parse_entries, toml_digest  # noqa: E402


def render() -> str:
    """The twin's text; every file passes :func:`parse_entries`'s checks first (CatalogError otherwise),
    since the loader skips them for the twin."""
    files = data_files()
    docs = {name: tomllib.loads(data.decode("utf-8")) for name, data in files}
    for name, d in docs.items():
        parse_entries(d, name.removesuffix(".toml"))
    doc = {"toml_sha256": toml_digest(files), "files": docs}
    return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the twin is not current, write nothing")
    args = ap.parse_args(argv)
    path = ROOT / "hangdbg" / "catalog" / "data" / TWIN
    text = render()
    if args.check:
        current = path.exists() and path.read_text(encoding="utf-8") == text
        print("current" if current else f"stale: run {Path(__file__).name}", file=sys.stderr)
        return 0 if current else 1
    path.write_text(text, encoding="utf-8")
    print(f"{path}: {len(text)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
