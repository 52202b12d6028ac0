"""``hangdbg schema``: the JSON Schema of every document hangdbg writes, or the finding kinds."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..model import SCHEMA_VERSION
from ..report.schema import schema_text
from ..outdir import OutDir
from .common import EXIT_OK, Command


class SchemaCommand(Command):
    description = (
        f"Print the JSON Schema (draft 2020-12) of the documents that --json prints and -o DIR writes "
        f"(schema_version {SCHEMA_VERSION}), or with --kinds the finding kinds, severities and evidence kinds."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--kinds", action="store_true",
                       help="print the finding kinds (with the level each is about: rank, node, gpu, job, tool), severities "
                            "and evidence kinds as tables")
        p.add_argument("-o", "--out", metavar="DIR", type=Path, help=f"write DIR/hangdbg-schema-v{SCHEMA_VERSION}.json")

    def run(self, args: argparse.Namespace) -> int:
        text = schema_text()
        if args.out is not None:
            self.files = OutDir(args.out)
            self.files.save_text(f"hangdbg-schema-v{SCHEMA_VERSION}.json", text + "\n")
            for n in self.files.not_saved:
                self.warn(f"not saved: {n.path}: {n.reason}")
        if args.kinds:
            from ..report.schema_view import render_kinds

            self.out.print(render_kinds())
            return EXIT_OK
        self.out.file.write(text + "\n")
        self.out.file.flush()
        return EXIT_OK
