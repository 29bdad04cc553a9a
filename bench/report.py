"""Turn pytest-benchmark JSON into the README's throughput table (markdown).

Usage: python bench/report.py bench/results.json [--out bench/RESULTS.md]
Rates use the median round; ratios compare to aiokafka on the same dataset.
"""

import argparse
import json
import pathlib
from collections import defaultdict

NAMES = {
    "test_kbatch": "kbatch",
    "test_kbatch_no_crc": "kbatch (CRC off)",
    "test_aiokafka": "aiokafka",
    "test_kafka_python": "kafka-python",
    "test_floor_memcpy_crc32c": "memcpy + CRC-32C floor",
}


def rows(results: dict):
    table = defaultdict(dict)
    for b in results["benchmarks"]:
        info = b["extra_info"]
        test = b["name"].split("[")[0]
        median = b["stats"]["median"]
        table[info["dataset"]][NAMES.get(test, test)] = (
            info["records"] / median, info["bytes"] / median, median)
    return table


def markdown(table) -> str:
    out = ["| dataset | decoder | records/s | MB/s | median s | vs aiokafka |",
           "|---|---|---:|---:|---:|---:|"]
    for dataset, decoders in table.items():
        base = decoders.get("aiokafka", (None,))[0]
        for decoder, (rps, bps, median) in sorted(decoders.items(), key=lambda kv: -kv[1][0]):
            ratio = f"{rps / base:.1f}x" if base else "-"
            out.append(f"| {dataset} | {decoder} | {rps / 1e6:.2f} M | {bps / 1e6:.0f} | "
                       f"{median:.3f} | {ratio} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    text = markdown(rows(json.loads(pathlib.Path(args.results).read_text())))
    if args.out:
        pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
