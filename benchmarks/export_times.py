"""Export time and agreement of every installed strategy on the presets (and BERT-base with --large).

Run: .venv/bin/python benchmarks/export_times.py [--large]
Not part of the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from modelexport_core.export.pipeline import ExportOptions
from modelexport_core.measure.compare import compare_strategies
from modelexport_core.prepare.models import LoadedModel, load_model
from modelexport_core.prepare.presets import PRESETS


def bert_base() -> LoadedModel:
    import transformers

    config = transformers.BertConfig()  # the BERT-base shape: 12 layers, hidden 768
    return LoadedModel(transformers.BertModel(config).eval(), "bert-base (random weights)", "factory")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also BERT-base (random weights)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    models = {f"preset:{name}": (lambda n=name: load_model(f"preset:{n}")) for name in sorted(PRESETS)}
    if args.large:
        models["bert-base"] = bert_base
    rows = []
    for label, make in models.items():
        for result in compare_strategies(make(), ExportOptions(verify=False)):
            rows.append({"model": label, **result.__dict__})
            print(f"{label:16} {result.strategy:18} {result.status:7} "
                  f"{result.seconds:6.2f} s  agreement {result.agreement if result.agreement is not None else '-'}",
                  file=sys.stderr)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
