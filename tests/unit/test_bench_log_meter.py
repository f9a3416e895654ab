"""The cost benchmark's log meter: what each function logged, EMF documents and their series apart."""

from __future__ import annotations

import io
import json

from tests.bench._sweeps import LogMeter


def test_lines_are_counted_by_function_and_emf_documents_by_series() -> None:
    passthrough = io.StringIO()
    meter = LogMeter(passthrough)
    record = json.dumps({"level": "INFO", "message": "probed", "function_name": "hyperpod-nccl-probe_node"})
    emf = json.dumps(
        {
            "_aws": {
                "CloudWatchMetrics": [
                    {
                        "Namespace": "N",
                        "Dimensions": [["Cluster", "service"]],
                        "Metrics": [{"Name": "NodesProbed"}, {"Name": "NodesUnreachable"}],
                    }
                ]
            },
            "Cluster": "c1",
            "service": "s",
            "NodesProbed": [2.0],
        }
    )
    # Written in pieces, as a sandbox's forwarded log arrives.
    meter.write(record[:10])
    meter.write(record[10:] + "\n" + emf + "\nnot json\n")
    meter.flush()
    assert meter.bytes_by_function == {"probe_node": len(record) + 1}
    assert meter.metric_bytes == len(emf) + 1
    assert meter.metric_series == {
        ("N", "NodesProbed", (("Cluster", "c1"), ("service", "s"))),
        ("N", "NodesUnreachable", (("Cluster", "c1"), ("service", "s"))),
    }
    assert passthrough.getvalue() == "not json\n"
