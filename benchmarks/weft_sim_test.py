"""weft-sim's fabrics, JSON, pictures and errors.

    python3 benchmarks/weft_sim_test.py build/benchmarks/weft-sim
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

from checks import expect, finish

SIM = sys.argv[1]


def run(*args):
    return subprocess.run([SIM, *args], capture_output=True, text=True, timeout=240)


with tempfile.TemporaryDirectory() as scratch:
    out_json = os.path.join(scratch, "racks.json")
    traffic = os.path.join(scratch, "traffic.svg")
    tiers = os.path.join(scratch, "tiers.svg")
    result = run("--fabric", "nvl72", "--nodes", "2", "--tiers", "2", "--collective", "allreduce",
                 "-b", "1M", "-e", "16M", "-f", "16", "--algorithm", "ring,hierarchical(ring,ring)",
                 "--json", out_json, "--traffic", traffic, "--tiers-svg", tiers)
    expect(result.returncode == 0, "two NVL72 racks, two tiers: runs", result)
    expect("2 x nvl72, 2-tier scale-out" in result.stdout, "the header names the machine", result)
    report = json.load(open(out_json)) if os.path.exists(out_json) else {"rows": []}
    expect(report.get("ranks") == 144 and len(report["rows"]) == 4, "JSON: 144 ranks, 2 sizes x 2 algorithms")
    for row in report["rows"]:
        matrix = row.get("traffic") or []
        total = sum(sum(line) for line in matrix)
        by_tier = row["scale_up_bytes"] + row["scale_out_bytes"]
        expect(len(matrix) == 144 and abs(total - by_tier) <= 1e-6 * by_tier,
               f"JSON {row['algorithm']} {row['bytes']}: the traffic matrix sums to the bytes by tier "
               f"({total:.6g} and {by_tier:.6g})")
        expect(0 < row["hottest_busy"] <= 1.0 + 1e-9, f"JSON {row['algorithm']} {row['bytes']}: hottest link busy "
               f"{row['hottest_busy']:.3g} of the run")
        links = row.get("links") or []
        busiest = max(links, key=lambda link: link["busy"]) if links else {}
        out_bytes = sum(link["bytes"] for link in links if link["tier"] == "scale-out" and link["name"].endswith(" out")
                        and " nic " in link["name"])
        expect(busiest.get("name") == row["hottest_link"] and abs(out_bytes - row["scale_out_bytes"]) <= 1e-9 * max(1, out_bytes),
               f"JSON {row['algorithm']} {row['bytes']}: per-link bytes (the busiest is the hottest; the NICs' "
               f"outgoing bytes are the scale-out bytes)")
    largest = {row["algorithm"]: row for row in report["rows"] if row["bytes"] == 16 << 20}
    if len(largest) == 2:
        expect(largest["hierarchical(ring,ring)"]["scale_out_bytes"] < largest["ring"]["scale_out_bytes"],
               "hierarchical sends fewer bytes out of the racks than the ring")
    # The pictures read on their own: each panel's simulated time (as the JSON has it), one colour
    # scale, the axes named, rank numbers where each rack starts; the bars' values written.
    def time_label(seconds):
        return f"{seconds * 1e6:.3g} us" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"

    def bytes_label(size):
        units = ["B", "KiB", "MiB", "GiB", "TiB"]
        u = 0
        while size >= 1024 and u < 4:
            size /= 1024
            u += 1
        return f"{size:.3g} {units[u]}"

    ring = largest.get("ring", {"seconds": 0, "scale_out_bytes": 0})
    tree = largest.get("hierarchical(ring,ring)", {"seconds": 0, "scale_out_bytes": 0})
    for path, words in ((traffic, ["ring, 16 MiB", "hierarchical(ring,ring), 16 MiB", "144 ranks",
                                   "simulated time " + time_label(ring["seconds"]),
                                   "simulated time " + time_label(tree["seconds"]),
                                   "one scale for every panel", "sending rank", "receiving rank", "72"]),
                        (tiers, ["scale-up: inside a node", "scale-out: between nodes",
                                 "ring, 16 MiB: " + time_label(ring["seconds"]),
                                 bytes_label(ring["scale_out_bytes"]), bytes_label(tree["scale_out_bytes"])])):
        try:
            text = " ".join(ElementTree.parse(path).getroot().itertext())
            expect(all(word in text for word in words), f"{os.path.basename(path)}: an SVG saying {words}")
        except (OSError, ElementTree.ParseError) as error:
            expect(False, f"{os.path.basename(path)}: a well-formed SVG ({error})")

    again = os.path.join(scratch, "again.json")
    result = run("--fabric", "nvl72", "--nodes", "2", "--tiers", "2", "--collective", "allreduce",
                 "-b", "1M", "-e", "16M", "-f", "16", "--algorithm", "ring,hierarchical(ring,ring)", "--json", again)
    expect(result.returncode == 0 and os.path.exists(again) and os.path.exists(out_json)
           and open(again, "rb").read() == open(out_json, "rb").read(),
           "the same run twice: byte-identical JSON", result)

    result = run("--fabric", "ualink", "--accelerators", "64", "--lanes", "2", "--collective", "allgather",
                 "-b", "64K", "-e", "64K", "--algorithm", "ring,automatic")
    expect(result.returncode == 0 and "1 x ualink" in result.stdout and " 64 ranks" in result.stdout,
           "a UALink pod of 64", result)

    result = run("--fabric", "hgx", "--nodes", "4", "--tiers", "3", "--leaf-ports", "8", "--pod-leaves", "2",
                 "--oversubscription", "2", "--collective", "alltoall", "-b", "1M", "-e", "1M")
    expect(result.returncode == 0 and "3-tier scale-out 2:1" in result.stdout, "HGX under three tiers at 2:1", result)

    # Sizes as weft-bench counts them: an allgather's whole output, a reduce_scatter's whole input,
    # rounded down to a multiple of the ranks; busbw then approaches the port's 50 GB/s.
    sized = os.path.join(scratch, "sized.json")
    for collective in ("allgather", "reduce_scatter"):
        result = run("--fabric", "uniform", "--ranks", "3", "--gbps", "400", "--latency-us", "1", "--collective",
                     collective, "-b", "64M", "-e", "64M", "--algorithm", "ring", "--json", sized)
        rows = json.load(open(sized))["rows"] if result.returncode == 0 else []
        size = (64 << 20) // 4 // 3 * 3 * 4
        expect(len(rows) == 1 and rows[0]["bytes"] == size and 0.95 * 50 < rows[0]["busbw_gbs"] <= 50,
               f"{collective}: the size is the largest buffer ({size} B) and busbw near the port's 50 GB/s "
               f"({rows[0]['busbw_gbs'] if rows else None})", result)

    for bad, why in ((["--tiers", "4"], "1, 2 or 3"), (["--fabric", "torus"], "not hgx, nvl72, ualink or uniform"),
                     (["--fabric", "ualink", "--accelerators", "2000"], "at most 1024"),
                     (["--oversubscription", "0.5"], "--oversubscription wants a finite number >= 1"),
                     (["--latency-us", "inf"], "--latency-us wants a finite number >= 0, not 'inf'"),
                     (["--latency-us", "nan"], "--latency-us wants a finite number"),
                     (["--gbps", "0"], "--gbps wants a finite number > 0, not '0'"),
                     (["--scale-out-gbps", "-1"], "--scale-out-gbps wants a finite number > 0"),
                     (["--fabric", "nvl72", "--nics", "80"], "must not exceed the GPUs of a domain"),
                     # A flag the fabric has no use for is refused, never ignored (it would run
                     # another machine than the one asked for).
                     (["--fabric", "nvl72", "--ranks", "16"], "--ranks applies to --fabric uniform, not nvl72"),
                     (["--fabric", "nvl72", "--accelerators", "16"], "--accelerators applies to --fabric ualink, not nvl72"),
                     (["--fabric", "nvl72", "--gpus-per-node", "73"], "an NVL72 rack has at most 72 GPUs"),
                     (["--fabric", "hgx", "--lanes", "2"], "--lanes applies to --fabric ualink, not hgx"),
                     (["--fabric", "ualink", "--scale-up-gbps", "800"], "a UALink port is set by --lanes"),
                     (["--fabric", "uniform", "--gpus-per-node", "4"], "sized by --ranks"),
                     (["--fabric", "uniform", "--tiers", "2"], "--fabric uniform has none"),
                     (["--fabric", "nvl72", "--scale-out-gbps", "800"], "is one domain; ask for more with --nodes"),
                     (["--fabric", "hgx", "--nodes", "1", "--oversubscription", "2"], "is one domain"),
                     (["--fabric", "hgx", "--nics", "9"], "must not exceed the GPUs of a domain (8)"),
                     (["--fabric", "ualink", "--switch-efficiency", "0.5"],
                      "--switch-efficiency applies to --fabric hgx or nvl72, not ualink"),
                     (["--fabric", "uniform", "--launch-us", "5"], "--launch-us applies to --fabric"),
                     (["--scale-up-efficiency", "1.5"], "at most 1"),
                     (["--scale-up-efficiency", "0"], "--scale-up-efficiency wants a finite number > 0"),
                     (["--switch-efficiency", "0", "--switch-us", "3"], "the scale-up switch does not reduce"),
                     (["--tiers", "2", "--sharp-efficiency", "0.9"], "is one tier (--tiers 1)"),
                     (["--sharp-us", "2"], "give --sharp-efficiency"),
                     (["--fabric", "hgx", "--nodes", "1", "--sharp-efficiency", "0.9"], "is one domain")):
        result = run(*bad)
        expect(result.returncode == 2 and why in result.stderr, f"refused: {' '.join(bad)}", result)

    # The switch that reduces: in_switch runs where it does, and its figures come from the flags.
    switched = os.path.join(scratch, "switched.json")
    result = run("--fabric", "hgx", "--nodes", "1", "--collective", "allreduce", "-b", "1G", "-e", "1G",
                 "--algorithm", "ring,in_switch,automatic", "--json", switched)
    rows = {r["algorithm"]: r for r in json.load(open(switched))["rows"]} if result.returncode == 0 else {}
    expect(set(rows) == {"ring", "in_switch", "automatic"} and rows["in_switch"]["busbw_gbs"] > rows["ring"]["busbw_gbs"]
           and "the switch reducing at" in result.stdout and "automatic: in_switch" in result.stdout,
           "hgx: in_switch faster than the ring at 1 GiB, and automatic's choice", result)
    result = run("--fabric", "hgx", "--nodes", "1", "--switch-efficiency", "0", "--collective", "allreduce",
                 "-b", "1M", "-e", "1M", "--algorithm", "in_switch")
    expect(result.returncode == 1 and "one switch that reduces" in result.stdout,
           "--switch-efficiency 0: in_switch fails, saying why", result)
    result = run("--fabric", "hgx", "--nodes", "2", "--tiers", "1", "--sharp-efficiency", "0.9", "--sharp-us", "3",
                 "--collective", "allreduce", "-b", "1M", "-e", "1M", "--algorithm", "in_switch")
    expect(result.returncode == 0 and " in_switch " in result.stdout,
           "--sharp-efficiency: in_switch across two nodes through the network's switch", result)

    # The rack's GPU count: 16 of an NVL72's 72.
    rack = os.path.join(scratch, "rack.json")
    result = run("--fabric", "nvl72", "--gpus-per-node", "16", "--collective", "allreduce", "-b", "1M", "-e", "1M",
                 "--algorithm", "ring", "--json", rack)
    ranks = json.load(open(rack)).get("ranks") if result.returncode == 0 else None
    expect(ranks == 16 and " 16 ranks" in result.stdout, f"nvl72 --gpus-per-node 16: 16 ranks ({ranks})", result)

    for flag in ("--help", "-h"):
        result = run(flag)
        expect(result.returncode == 0 and "usage: weft-sim" in result.stdout and "[hgx]" in result.stdout
               and "[allreduce]" in result.stdout and not result.stderr,
               f"{flag}: the flags with their defaults on stdout, exit 0", result)

finish()
