"""OpenRTB 2.6 validation against IAB's JSON Schema (Draft 2020-12), with PyPI's jsonschema.

The schema is read from the folder given, never copied: ../shared/data/openrtb/schema.
As a program: openrtb_schema.py SCHEMA_DIR OBJECT FILE... prints one JSON line per file,
{"file": ..., "errors": [...]}, and exits 1 when any file is invalid.
"""
import json
import sys
from pathlib import Path

import jsonschema
from referencing import Registry, Resource


class Validator:
    def __init__(self, schema_dir):
        folder = Path(schema_dir)
        registry = Registry()
        self.schemas = {}
        for path in sorted(folder.glob("*.json")):
            schema = json.loads(path.read_text())
            registry = registry.with_resource(schema["$id"], Resource.from_contents(schema))
            self.schemas[path.stem] = schema
        self.registry = registry

    def errors(self, document, object_name="BidRequest"):
        """Every schema violation of `document` as an object of that name, as 'path: message'."""
        schema = self.schemas[object_name]
        validator = jsonschema.Draft202012Validator(schema, registry=self.registry)
        found = []
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(part) for part in error.absolute_path) or "(top)"
            found.append(f"{where}: {error.message}")
        return found


def main(argv):
    if len(argv) < 4:
        print("usage: openrtb_schema.py SCHEMA_DIR OBJECT FILE...", file=sys.stderr)
        return 2
    validator = Validator(argv[1])
    invalid = False
    for name in argv[3:]:
        try:
            document = json.loads(Path(name).read_text())
            errors = validator.errors(document, argv[2])
        except (OSError, ValueError) as error:
            errors = [f"unreadable: {error}"]
        invalid = invalid or bool(errors)
        print(json.dumps({"file": name, "errors": errors}))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
