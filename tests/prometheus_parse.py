"""Parse a Prometheus text exposition with Prometheus's own Python parser
(prometheus_client.parser, PyPI prometheus-client) and print its metric families as JSON:
[{"name", "type", "help", "samples": [{"name", "labels", "value"}]}]. A text the parser refuses
exits non-zero with its error. Used by tests/metrics.rs."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    families = [
        {
            "name": family.name,
            "type": family.type,
            "help": family.documentation,
            "samples": [
                {"name": s.name, "labels": s.labels, "value": s.value}
                for s in family.samples
            ],
        }
        for family in text_string_to_metric_families(text)
    ]
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
