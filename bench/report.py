"""Turn pytest-benchmark JSON into the README's benchmark section.

    python bench/report.py bench/results.json [more.json ...] [--readme README.md]

Writes ``bench/RESULTS.md`` (markdown tables) and ``bench/throughput.png``
(records/s by dataset and decoder, log scale), and replaces the README's
section between ``<!-- bench:start -->`` and ``<!-- bench:end -->``. Rates use
the median round; ratios compare with aiokafka on the same dataset (decode)
or with Spark's Parquet reader on the same query (Spark).
"""

import argparse
import json
import pathlib
import platform
import re
from collections import defaultdict

HERE = pathlib.Path(__file__).resolve().parent
NAMES = {
    "test_kbatch": "kbatch",
    "test_kbatch_no_crc": "kbatch (CRC off)",
    "test_kbatch_zero_copy": "kbatch (zero_copy)",
    "test_kbatch_all_cores": "kbatch (all cores)",
    "test_aiokafka": "aiokafka",
    "test_kafka_python": "kafka-python",
    "test_floor_memcpy_crc32c": "memcpy + CRC-32C (floor)",
}
DATASET_ORDER = ["small", "headers", "gzip", "snappy", "lz4", "zstd", "large",
                 "log dir: plain", "log dir: lz4", "log dir: plain+lz4"]
DECODER_ORDER = list(NAMES.values())
DATASET_NOTES = {
    "small": "5 M records, 8-16 B keys, 100 B values, ~16 KB batches",
    "headers": "the same with 2 headers per record",
    "gzip": "small records, gzip", "snappy": "small records, snappy (xerial)",
    "lz4": "small records, lz4", "zstd": "small records, zstd",
    "large": "60 k records of 10 KB values",
    "log dir: plain": "2 partitions x 10 segments of ~24 MB, uncompressed, "
                      "open_log_dir(...).read(threads=N)",
    "log dir: lz4": "the same layout, lz4",
    "log dir: plain+lz4": "both topics (40 segments)",
}


def collect(results: dict):
    decode = defaultdict(dict)
    other = defaultdict(dict)     # "from path: X" and "projection (...)" groups
    spark = defaultdict(dict)
    spark_floor = {}
    codecs = defaultdict(dict)
    txn = {}
    for b in results["benchmarks"]:
        if b.get("group") == "remote":
            continue   # bench/test_remote.py writes bench/REMOTE.md itself
        info, median = b["extra_info"], b["stats"]["median"]
        test = b["name"].split("[")[0]
        if b.get("group") in ("internal", "latest (paired)"):   # their own tables
            continue
        if b.get("group") == "scaling":       # scaling_table
            continue
        if b.get("group") == "spark floor":
            spark_floor[info.get("label", "count, one row")] = median
            continue
        rate = (info["records"] / median, info["bytes"] / median, median)
        if str(b.get("group", "")).startswith(("from path", "projection")):
            other[b["group"]][info["label"]] = rate
        elif info.get("codec_test", "").startswith("paired"):
            codecs[info["dataset"]][info["codec_test"]] = info
        elif "codec_test" in info:
            codecs[info["dataset"]][info["codec_test"]] = rate
        elif b.get("group") == "read_committed":
            txn[info["mode"]] = rate
        elif b.get("group") == "read_committed (paired)":
            txn.setdefault("paired", {})[info.get("reader", "read_segment")] = (
                info["ratio_median"], *info["ratio_quartiles"])
        elif test == "test_spark":
            spark[b["params"]["query"]][b["params"]["source"]] = rate
        elif test == "test_memory_copy_floor":
            other.setdefault("scaling", {})[("memory copy", b["params"]["threads"])] = median
        elif test == "test_log_dir_read":
            decode[f"log dir: {info.get('topics', 'plain+lz4')}"][
                f"kbatch open_log_dir, {b['params']['threads']} thread(s)"] = rate
            other.setdefault("scaling", {})[(info.get("topics", "plain+lz4"),
                                             b["params"]["threads"])] = median
        else:
            decode[info["dataset"]][NAMES.get(test, test)] = rate
    if spark_floor:
        spark["floor"] = spark_floor
    return decode, spark, txn, codecs, other


def from_path_table(other) -> str:
    """Every side starting from the segment file: kbatch (copy and zero_copy)
    against aiokafka and against one CRC-32C pass over the file."""
    groups = [g for g in other if g.startswith("from path")]
    if not groups:
        return ""
    out = ["| from the path (CRC on, one core) | reader | records/s | median s | vs aiokafka "
           "| time / one CRC-32C pass (mmap) |", "|---|---|---:|---:|---:|---:|"]
    for g in sorted(groups):
        rows = other[g]
        base = rows.get("aiokafka", (None,))[0]
        floor = rows.get("one CRC-32C pass (mmap + crc32c)", (None, None, None))[2]
        for name, (rps, _, med) in rows.items():
            vs = f"**{rps / base:.1f}x**" if base and name.startswith("kbatch") else "-"
            fl = f"{med / floor:.2f}" if floor else "-"
            out.append(f"| {g[len('from path: '):]} | {name} | {rps / 1e6:.2f} M | {med:.3f} "
                       f"| {vs} | {fl} |")
    out += ["", "Page cache: *written in batches* is the file as a broker leaves it "
            "(appended in 16 KiB writes: cached in small folios, so a mapping pays for "
            "every 4 KiB page); *read from disk* is the file dropped from the cache and "
            "read back once (Linux caches it in large folios, which a mapping takes "
            "2 MiB at a time). aiokafka and the read + crc32c pass copy the file either "
            "way; the mapping readers see the difference."]
    return "\n".join(out)


def projection_table(other) -> str:
    """columns=[...] against the full decode of the same bytes (small)."""
    groups = [g for g in other if g.startswith("projection")]
    if not groups:
        return ""
    out = ["| small, from bytes | columns | records/s | median s | speed-up over every column |",
           "|---|---|---:|---:|---:|"]
    for g in sorted(groups):
        rows = other[g]
        full = rows.get("every column", (None, None, None))[2]
        for name, (rps, _, med) in rows.items():
            out.append(f"| {g} | {name} | {rps / 1e6:.2f} M | {med:.3f} | "
                       f"{f'{full / med:.2f}x' if full else '-'} |")
    out += ["", "Floor rows: what no projection that reads the records can go under. With "
            "the CRC on, every byte is read once (one CRC-32C pass); with it off, finding "
            "each ~120-byte record's framing still touches every pair of 64-byte cache "
            "lines (one byte loaded from every 128 bytes, numpy). Their speed-up is the "
            "most any projection can reach on this data and machine."]
    return "\n".join(out)


def codec_table(codecs) -> str:
    """Per codec: kbatch against (its decompressor alone + the uncompressed
    decode of the result), the Python path, and 2 threads against 1."""
    if not codecs:
        return ""
    out = ["| codec | Python path records/s | native records/s | native, 2 threads "
           "records/s | 2 threads / 1 | decompressor alone + uncompressed decode, s "
           "| kbatch / (decompressor + decode) | paired: kbatch / (decompressor + decode) "
           "| paired: 2 threads / 1 |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in [c for c in ("gzip", "snappy", "lz4", "zstd") if c in codecs]:
        rows = codecs[name]
        native, python, two = (rows.get(k) for k in ("native", "python path",
                                                     "native, 2 threads"))
        alone, plain = rows.get("decompressor alone"), rows.get("uncompressed decode")
        floor = alone[2] + plain[2] if alone and plain else None
        paired, threads = rows.get("paired"), rows.get("paired threads")
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            name, f"{python[0] / 1e6:.2f} M" if python else "-",
            f"{native[0] / 1e6:.2f} M" if native else "-",
            f"{two[0] / 1e6:.2f} M" if two else "-",
            f"{native[2] / two[2]:.2f}x" if native and two else "-",
            f"{alone[2]:.3f} + {plain[2]:.3f}" if floor else "-",
            f"{native[2] / floor:.2f}" if native and floor else "-",
            "**{:.2f}** ({:.2f}-{:.2f})".format(paired["ratio_median"],
                                               *paired["ratio_quartiles"]) if paired else "-",
            "**{:.2f}x** ({:.2f}-{:.2f})".format(threads["scaling_median"],
                                                *threads["scaling_quartiles"]) if threads else "-"))
    out += ["", "Decompressor alone: the reference library called once per batch on its "
            "compressed records (zlib-ng, cramjam's snappy, lz4.frame, zstandard); "
            "uncompressed decode: `read_segment` over the same batches stored uncompressed. "
            "Paired: kbatch, the decompressor and the decode (or 1 and 2 threads) timed "
            "back to back in each of 8 rounds, median of the per-round ratios "
            "(quartiles in brackets)."]
    return "\n".join(out)


def txn_table(txn) -> str:
    """read_committed against read_uncommitted of the same reader."""
    if not txn:
        return ""
    out = ["| transactional segment (5 M records) | records/s | median s | cost over read_uncommitted |",
           "|---|---:|---:|---:|"]
    paired = txn.get("paired")
    for mode, rate in txn.items():
        if mode == "paired":
            continue
        rps, _, med = rate
        base = txn.get(mode.replace("read_committed", "read_uncommitted"))
        cost = (f"{(med / base[2] - 1) * 100:+.0f}%" if base and "read_committed" in mode
                else "-")
        out.append(f"| {mode} | {rps / 1e6:.2f} M | {med:.3f} | {cost} |")
    for reader, (ratio, q1, q3) in sorted((paired or {}).items()):
        out += ["", f"Paired (both isolations timed back to back in each of 15 rounds): "
                f"{reader} read_committed costs **{(ratio - 1) * 100:+.1f}%** over "
                f"read_uncommitted (median of the per-round ratios; quartiles "
                f"{(q1 - 1) * 100:+.1f}% / {(q3 - 1) * 100:+.1f}%)."]
    return "\n".join(out)


def internal_table(results: dict) -> str:
    """Offset-commit decoding into Arrow (bench/test_internal.py)."""
    rows = [b for b in results["benchmarks"] if b.get("group") == "internal"]
    if not rows:
        return ""
    out = ["| `__consumer_offsets` (2 M offset commits) -> Arrow, one core | rows/s | median s |",
           "|---|---:|---:|"]
    for b in rows:
        med = b["stats"]["median"]
        out.append(f"| offset_commits, {b['extra_info']['mode']} | "
                   f"{b['extra_info']['records'] / med / 1e6:.2f} M | {med:.3f} |")
    return "\n".join(out)


def latest_table(results: dict) -> str:
    """The table view next to a plain read (bench/test_latest.py)."""
    rows = [b for b in results["benchmarks"] if b.get("group") == "latest (paired)"]
    if not rows:
        return ""
    out = ["| partition (2 M records, 4 segments) | rows of the table | plain read + "
           "view=\"latest\", median s | speed of view=\"latest\" / plain read |",
           "|---|---:|---:|---:|"]
    for b in rows:
        info = b["extra_info"]
        lo, hi = info["ratio_quartiles"]
        out.append(f"| {info['dataset']} | {info['rows']:,} | {b['stats']['median']:.3f} | "
                   f"**{info['speed_ratio']:.2f}** ({lo:.2f}-{hi:.2f}) |")
    out += ["", "Paired: a plain `open_log(p).read()` and `read(view=\"latest\")` timed back "
            "to back in each round, median of the per-round ratios (quartiles in brackets)."]
    return "\n".join(out)


REGISTRY_GROUPS = {"registry": "1 M framed Avro values (10 fields) -> pyarrow, one core",
                   "registry-protobuf": "1 M framed Protobuf values (10 fields) -> pyarrow, one core",
                   "registry-json": "1 M framed JSON Schema values (10 fields) -> pyarrow, one core"}


def registry_table(results: dict) -> str:
    """Schema Registry payloads into Arrow (bench/test_registry.py): per format,
    kbatch and the Python routes, as ratios to the fastest Python route
    (``extra_info["peer"]``; the Avro rows before it was recorded: "fastavro")."""
    parts = []
    for group, title in REGISTRY_GROUPS.items():
        rows = [b for b in results["benchmarks"] if b.get("group") == group]
        if not rows:
            continue
        peer = [b for b in rows if b["extra_info"].get("peer") or "fastavro" in b["extra_info"]["route"]]
        base = min((b["stats"]["median"] for b in peer), default=None)
        out = [f"| {title} | values/s | median s | vs the fastest Python route |", "|---|---:|---:|---:|"]
        for b in sorted(rows, key=lambda b: b["stats"]["median"]):
            med = b["stats"]["median"]
            ratio = "-" if base is None else (f"{base / med:.2f}x" if b in peer else f"**{base / med:.1f}x**")
            out.append(f"| {b['extra_info']['route']} | {b['extra_info']['records'] / med / 1e6:.2f} M | "
                       f"{med:.3f} | {ratio} |")
        parts.append("\n".join(out))
    return "\n\n".join(parts)


def decode_table(decode) -> str:
    out = ["| dataset | decoder | records/s | MB/s | median s | vs aiokafka |",
           "|---|---|---:|---:|---:|---:|"]
    for ds in [d for d in DATASET_ORDER if d in decode] + [d for d in decode if d not in DATASET_ORDER]:
        rows = decode[ds]
        base = rows.get("aiokafka", (None,))[0]
        for name in [n for n in DECODER_ORDER if n in rows] + sorted(
                n for n in rows if n not in DECODER_ORDER):
            rps, bps, med = rows[name]
            ratio = f"**{rps / base:.1f}x**" if base and name.startswith("kbatch") else (
                f"{rps / base:.2f}x" if base else "-")
            out.append(f"| {ds} | {name} | {rps / 1e6:.2f} M | {bps / 1e6:,.0f} | {med:.3f} | {ratio} |")
    return "\n".join(out)


def spark_table(spark) -> str:
    if not spark:
        return ""
    floor = spark.pop("floor", None)
    out = ["| Spark query (5 M records, local[*]) | format(\"kbatch\") rows/s | Parquet rows/s | kbatch / Parquet |",
           "|---|---:|---:|---:|"]
    for query, rows in spark.items():
        k, p = rows.get("kbatch"), rows.get("parquet")
        ratio = f"{k[0] / p[0]:.2f}" if k and p else "-"
        out.append(f"| {query} | {k[0] / 1e6:.2f} M | {p[0] / 1e6:.2f} M | {ratio} |"
                   if k and p else f"| {query} | - | - | - |")
    parquet_count = spark.get("count", {}).get("parquet")
    parquet_group = spark.get("groupBy(partition).count", {}).get("parquet")
    one, many = (floor or {}).get("count, one row"), (floor or {}).get("count, 5 M rows")
    many_group = (floor or {}).get("groupBy(partition).count, 5 M rows")
    if one is not None and parquet_count:
        out += ["", f"The floor of any Python data source: `count()` of a source that "
                f"yields one row takes {one:.3f} s (median), Parquet's `count()` of the "
                f"5 M records {parquet_count[2]:.3f} s (it reads row counts from the "
                f"footers)."]
        if many is not None:
            out[-1] += (f" A source that yields 5 M prebuilt rows of one int column "
                        f"(no reading, no decoding) takes {many:.3f} s to count: Spark 4 "
                        f"turns every row a Python source yields into a row of its own "
                        f"(no column pruning, no aggregate pushdown, no columnar read), "
                        f"so no Python data source's count of these records can pass "
                        f"**{parquet_count[2] / many:.2f}x** Parquet's here")
            if many_group is not None and parquet_group:
                out[-1] += (f", nor its groupBy(partition).count **"
                            f"{parquet_group[2] / many_group:.2f}x** ({many_group:.3f} s)")
            out[-1] += "."
            counted = spark.get("count, columns=partition", {}).get("kbatch")
            if counted:
                out[-1] += (f" kbatch's `count()` with `columns=partition` takes "
                            f"{counted[2]:.3f} s, {counted[2] / many:.2f}x that floor.")
        summed = spark.get("level=batches: sum(records) (Parquet: count)", {}).get("kbatch")
        if summed is not None:
            out += ["", f"**level=batches**: `agg(sum(\"records\"))` (one row per batch, "
                    f"from the CRC-checked batch headers) takes {summed[2]:.3f} s, "
                    f"**{summed[2] / parquet_count[2]:.2f}x** the time of Parquet's "
                    f"`count()` of the same records ({parquet_count[2]:.3f} s) and "
                    f"{summed[2] / one:.2f}x the one-row Python source's count "
                    f"({one:.3f} s)"]
            alone = (floor or {}).get("read(level=batches), no Spark, one core")
            if alone is not None:
                out[-1] += (f"; kbatch's own part, `read(level=\"batches\")` of the "
                            f"partition without Spark (every header walked, CRCs "
                            f"checked), takes {alone:.3f} s on one core")
            out[-1] += "."
    return "\n".join(out)


def scaling_line(other) -> str:
    """Two (all) threads over one for the log dir reads, beside a plain
    memory copy of the plain topic's bytes (the bandwidth ceiling)."""
    times = other.get("scaling", {})
    many = max((t for _, t in times), default=1)
    if many < 2:
        return ""
    ratios = [(what, times[(what, 1)] / times[(what, many)])
              for what in ("plain", "lz4", "plain+lz4", "memory copy")
              if (what, 1) in times and (what, many) in times]
    if not ratios:
        return ""
    return (f"Log dir, {many} threads over 1 (medians): "
            + ", ".join(f"{what} **{r:.2f}x**" for what, r in ratios if what != "memory copy")
            + "".join(f". A plain copy of the plain topic's bytes in memory (numpy, no "
                      f"decoding) scales {r:.2f}x: the ceiling memory bandwidth sets for "
                      f"any read here" for what, r in ratios if what == "memory copy")
            + ".")


def scaling_table(results: dict) -> str:
    """bench/test_scaling.py: each row at every thread count (median, rate
    over the bytes read, speed-up over one thread, share of the numpy copy
    floor's rate at the same thread count), then the one-thread counters and
    the bound they set on many cores."""
    rows = [b for b in results["benchmarks"] if b.get("group") == "scaling"]
    if not rows:
        return ""
    table: dict = defaultdict(dict)
    info: dict = {}
    for b in rows:
        e = b["extra_info"]
        table[e["label"]][e["threads"]] = (b["stats"]["median"], e["bytes"])
        if "gil_share" in e:
            info[e["label"]] = e
    threads = sorted({t for cells in table.values() for t in cells})
    copy = table.get("floor: numpy copy of the plain bytes in memory", {})
    out = ["| read (threads: median, GB/s, over 1 thread, % of the numpy copy's GB/s) | "
           + " | ".join(f"{t}" for t in threads) + " |", "|---|" + "---:|" * len(threads)]
    for label, cells in table.items():
        line = []
        for t in threads:
            if t not in cells:
                line.append("-")
                continue
            median, nbytes = cells[t]
            cell = f"{median * 1e3:.0f} ms, {nbytes / median / 1e9:.2f} GB/s"
            if t > 1 and 1 in cells:
                cell += f", **{cells[1][0] / median:.2f}x**"
            if t in copy and not label.startswith("floor: numpy"):
                rate, floor = nbytes / median, copy[t][1] / copy[t][0]
                cell += f", {100 * rate / floor:.0f}%"
            line.append(cell)
        out.append(f"| {label} | " + " | ".join(line) + " |")
    if info:
        out += ["", "One thread's counters (medians of 3 runs, `bench/test_scaling.counters`): "
                "minor page faults per MiB read, and the share of the read during which "
                "the GIL was held (a ticking thread's GIL waits, CPU contention taken "
                "out), with the speed-up that share allows on any number of cores "
                "(Amdahl: 1 / share). Reasoned, not measured: this machine has "
                f"{max(threads)} cores.", "",
                "| read | minor faults / MiB | GIL held | bound on the speed-up from the GIL |",
                "|---|---:|---:|---:|"]
        for label, e in info.items():
            share = e["gil_share"]
            bound = f"{1 / share:.0f}x" if share > 0.005 else "> 200x"
            out.append(f"| {label} | {e['faults_per_mib']:.1f} | {100 * share:.1f}% | "
                       f"{bound} |")
    return "\n".join(out)


def floor_ratio_lines(decode) -> str:
    lines = []
    for ds in ("small", "large"):
        rows = decode.get(ds, {})
        if "kbatch" in rows and "memcpy + CRC-32C (floor)" in rows:
            ratio = rows["memcpy + CRC-32C (floor)"][0] / rows["kbatch"][0]
            lines.append(f"- {ds}: kbatch takes {ratio:.2f}x the time of one memcpy + CRC-32C "
                         "pass over the same bytes.")
    return "\n".join(lines)


def chart(decode, path: pathlib.Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    datasets = [d for d in DATASET_ORDER
                if d in decode and any(n in decode[d] for n in DECODER_ORDER)]
    decoders = [n for n in DECODER_ORDER if any(n in decode[d] for d in datasets)]
    width = 0.8 / max(len(decoders), 1)
    fig, ax = plt.subplots(figsize=(11, 5))
    for i, name in enumerate(decoders):
        xs = [j + i * width for j, d in enumerate(datasets) if name in decode[d]]
        ys = [decode[d][name][0] for d in datasets if name in decode[d]]
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("records / s (log scale)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(datasets))], datasets)
    ax.set_title("Decoding throughput, same bytes in memory, median of rounds")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+", help="pytest-benchmark JSON files (merged)")
    ap.add_argument("--readme", default=str(HERE.parent / "README.md"))
    args = ap.parse_args()
    results = [json.loads(pathlib.Path(p).read_text()) for p in args.results]
    results = {"benchmarks": [b for r in results for b in r["benchmarks"]],
               **{k: v for k, v in results[0].items() if k != "benchmarks"}}
    decode, spark, txn, codecs, other = collect(results)
    machine = results.get("machine_info", {})
    cpu = machine.get("cpu", {}).get("brand_raw", platform.processor() or "unknown CPU")
    png = HERE / "throughput.png"
    has_chart = chart(decode, png)
    parts = [f"Generated by `make bench` on {cpu}, {machine.get('cpu', {}).get('count', '?')} "
             f"cores, Python {machine.get('python_version', '?')}, "
             f"{results.get('datetime', '')[:10]}.", "",
             "\n".join(f"- `{k}`: {v}" for k, v in DATASET_NOTES.items() if k in decode), "",
             decode_table(decode), "", floor_ratio_lines(decode), "", scaling_line(other), ""]
    load = pathlib.Path(HERE / ".load")
    if load.exists():
        parts[0] += (" Load average (1 min) at the start and end of the run: "
                     f"{' '.join(load.read_text().split())}.")
    for table in (scaling_table(results), from_path_table(other), projection_table(other)):
        if table:
            parts += [table, ""]
    if codecs:
        parts += [codec_table(codecs), ""]
    if txn:
        parts += [txn_table(txn), ""]
    if spark:
        parts += [spark_table(spark), ""]
    if internal_table(results):
        parts += [internal_table(results), ""]
    if latest_table(results):
        parts += [latest_table(results), ""]
    if registry_table(results):
        parts += [registry_table(results), ""]
    if has_chart:
        parts += ["![throughput](bench/throughput.png)", ""]
    text = "\n".join(parts)
    (HERE / "RESULTS.md").write_text(text)
    readme = pathlib.Path(args.readme)
    if readme.exists():
        body = readme.read_text()
        new = re.sub(r"<!-- bench:start -->.*?<!-- bench:end -->",
                     "<!-- bench:start -->\n" + text.replace("\\", "\\\\") + "<!-- bench:end -->",
                     body, flags=re.S)
        readme.write_text(new)
    print(text)


if __name__ == "__main__":
    main()
