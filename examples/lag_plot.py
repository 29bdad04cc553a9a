"""Consumer lag over time for one group of the sample, as a PNG.

    python examples/lag_plot.py [SAMPLE_DIR] [OUT_PNG]

Writes the sample first when SAMPLE_DIR does not exist (``kbatch sample``).
"""

import argparse
from pathlib import Path


def main(sample: str = "sample", out: str = "examples/consumer_lag.png") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import kbatch
    if not Path(sample).is_dir():
        from kbatch.tools.sample import write_sample
        write_sample(sample)
    lag = kbatch.consumer_lag(sample, groups=["analytics"]).to_pandas()
    fig, ax = plt.subplots(figsize=(9, 4))
    for (topic, partition), rows in lag.groupby(["topic", "partition"]):
        ax.plot(rows["commit_timestamp"], rows["lag"], label=f"{topic}-{partition}")
    ax.set_title("consumer group 'analytics': lag behind the log end offset")
    ax.set_xlabel("commit time (UTC)")
    ax.set_ylabel("lag (records)")
    ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="Plot the consumer lag of the sample's 'analytics' group as a PNG "
                    "(writes the sample first when SAMPLE_DIR does not exist).")
    parser.add_argument("sample", nargs="?", default="sample", metavar="SAMPLE_DIR")
    parser.add_argument("out", nargs="?", default="examples/consumer_lag.png", metavar="OUT_PNG")
    args = parser.parse_args()
    main(args.sample, args.out)
