#!/usr/bin/env python3
"""Feeds every user-facing entry point bad input and checks the brief's contract for it.

  bad_input_sweep.py --build BUILD [--entry NAME ...] [--mpirun MPIRUN] [--timeout S] [--list] [-v]

"Bad input gets one clear line naming what and where, exit code 2, and loses nothing already
measured. Never a crash, a hang, or a silent default." For each case this checks:
  - no hang: the command ends within 20 s (--timeout);
  - no crash: no signal (exit code >= 128 or negative) and no "internal error";
  - the exit code: 2 for bad input (1 where the environment fails: an unwritable output path);
  - one line: stderr holds exactly one line besides "note:" lines (under mpirun: the tool's own
    lines, mpirun's are left aside), and it contains every fragment the case names (the thing:
    file and key, line or flag, and its value);
  - nothing lost: every file of the case's folder (earlier outputs, "measured.*") is byte for
    byte what it was, and no file appeared (no half-written output, no temporary left behind).
Entry points: eventsim and each subcommand, eventprof and eventrun (under mpirun, --entry
eventprof / eventrun; skipped without mpirun), the Python module (when built: BUILD/python), and
the scripts that read user files (scripts/plot_timeline.py, plot_search.py, check_timeline.py).
Prints one line per failing case and a count per entry point; exit 0 when every case holds.
"""
import argparse
import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT_S = 20  # --timeout: under a loaded machine's mpirun, more


class Case:
    def __init__(self, entry, name, argv, says=(), code=2, mpi=False, tool=None):
        self.entry = entry      # the entry point it exercises (counted per entry)
        self.name = name        # what is bad, for the report
        self.argv = argv        # the command; "{d}" is the case's folder
        self.says = list(says)  # fragments the one line must contain ({d} replaced)
        self.code = code
        self.mpi = mpi
        self.tool = tool        # under mpirun: the tool's line prefix ("eventprof", "eventrun")


def snapshot(folder):
    """Every file under folder -> its digest (nothing lost, nothing half-written left)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), folder) + "/"] = "dir"
        for f in filenames:
            path = os.path.join(dirpath, f)
            try:
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, folder)] = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                out[os.path.relpath(path, folder)] = "unreadable"
    return out


def tool_lines(case, stderr):
    lines = [l for l in stderr.splitlines() if l.strip()]
    lines = [l for l in lines if ": note: " not in l and not l.startswith("note:")]
    if case.mpi:
        # mpirun's own report of a non-zero exit surrounds the tool's lines; each rank may say
        # the same line (eventprof prints once from rank 0, eventrun from the failing rank).
        prefix = re.compile(r"^(\[rank \d+@[^\]]*\] |%s: )" % re.escape(case.tool))
        lines = sorted(set(l for l in lines if prefix.match(l)))
    return lines


def run_case(case, work, env, timeout=TIMEOUT_S):
    folder = tempfile.mkdtemp(prefix="case.", dir=work)
    seed = os.path.join(work, "seed")
    shutil.copytree(seed, folder, dirs_exist_ok=True)
    argv = [a.replace("{d}", folder) for a in case.argv]
    says = [s.replace("{d}", folder) for s in case.says]
    before = snapshot(folder)
    try:
        result = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                                errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [f"hang: no exit within {timeout} s"], ""
    problems = []
    rc = result.returncode
    if rc < 0 or rc >= 128:
        problems.append(f"crash: exit {rc}")
    elif rc != case.code:
        problems.append(f"exit code {rc}, expected {case.code}")
    lines = tool_lines(case, result.stderr)
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, expected 1")
    line = lines[0] if len(lines) == 1 else " | ".join(lines)
    if "internal error" in line or "Traceback" in result.stderr:
        problems.append("internal error / traceback")
    missing = [s for s in says if s not in line]
    if missing:
        problems.append("the line lacks " + ", ".join(repr(m) for m in missing))
    after = snapshot(folder)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        problems.append("files changed or left behind: " + ", ".join(changed))
    shutil.rmtree(folder, ignore_errors=True)
    return problems, line


# ---------------------------------------------------------------------------------------------
# Inputs: bundled files copied and broken in one place each (seed/ is copied into every case).

def read(path):
    with open(path) as f:
        return f.read()


def must_change(text, old, new):
    out = text.replace(old, new, 1)
    assert out != text, f"'{old}' not found"
    return out


def write_seed(seed, eventsim):
    os.makedirs(seed)
    files = {}
    model = read(os.path.join(ROOT, "configs/models/tiny-gpt.yaml"))
    moe = read(os.path.join(ROOT, "configs/models/tiny-moe.yaml"))
    cluster = read(os.path.join(ROOT, "configs/clusters/cpu-local.yaml"))
    device = read(os.path.join(ROOT, "configs/devices/a100-sxm4-80gb.yaml"))
    dgx = read(os.path.join(ROOT, "configs/clusters/dgx-a100.yaml"))
    # Models: malformed YAML, unknown keys at each level, wrong types, impossible values.
    files["m_tab.yaml"] = must_change(model, "hidden_size: 64", "\thidden_size: 64")
    files["m_unclosed.yaml"] = must_change(model, "{type: embedding}", "{type: embedding")
    files["m_dup.yaml"] = must_change(model, "hidden_size: 64", "hidden_size: 64\nhidden_size: 32")
    files["m_list.yaml"] = "- name: tiny-gpt\n- hidden_size: 64\n"
    files["m_layers_map.yaml"] = must_change(
        model, model[model.index("layers:"):], "layers: {type: decoder, count: 4}\n")
    files["m_unknown_top.yaml"] = model + "hiden_size: 64\n"
    files["m_unknown_layer.yaml"] = must_change(model, "count: 4,", "count: 4, cout: 4,")
    files["m_type_str.yaml"] = must_change(model, "hidden_size: 64", "hidden_size: sixty-four")
    files["m_type_list.yaml"] = must_change(model, "num_heads: 4", "num_heads: [4]")
    files["m_zero.yaml"] = must_change(model, "num_heads: 4", "num_heads: 0")
    files["m_negative.yaml"] = must_change(model, "seq_length: 32", "seq_length: -32")
    files["m_nan.yaml"] = must_change(model, "ffn_hidden_size: 256", "ffn_hidden_size: .nan")
    files["m_inf.yaml"] = must_change(model, "vocab_size: 512", "vocab_size: .inf")
    files["m_huge.yaml"] = must_change(model, "seq_length: 32", "seq_length: 1e308")
    files["m_beyond_int.yaml"] = must_change(model, "num_heads: 4", "num_heads: 4294967300")
    files["m_float_int.yaml"] = must_change(model, "num_heads: 4", "num_heads: 4.5")
    files["m_heads_not_dividing.yaml"] = must_change(model, "num_heads: 4", "num_heads: 3")
    files["m_layer_type.yaml"] = must_change(model, "type: decoder", "type: decodr")
    files["m_empty.yaml"] = ""
    files["m_comment_only.yaml"] = "# nothing\n"
    files["m_scalar.yaml"] = "tiny-gpt\n"
    files["m_dropout_nan.yaml"] = moe.replace("hidden_dropout: 0.0", "hidden_dropout: .nan")
    files["moe_topk_beyond.yaml"] = must_change(moe, "moe_router_topk: 2", "moe_router_topk: 9")
    # Clusters and devices.
    files["c_tab.yaml"] = must_change(cluster, "  gpus: 2", "\tgpus: 2")
    files["c_unclosed.yaml"] = must_change(cluster, "latency_us: 10}", "latency_us: 10")
    files["c_dup.yaml"] = must_change(cluster, "nodes: 2", "nodes: 2\nnodes: 4")
    files["c_list.yaml"] = "- nodes: 2\n"
    files["c_unknown_top.yaml"] = cluster + "nodez: 2\n"
    files["c_unknown_node.yaml"] = must_change(cluster, "  gpus: 2", "  gpus: 2\n  gpu: 2")
    files["c_unknown_device.yaml"] = must_change(cluster, "    memory_gib: 4",
                                                 "    memory_gib: 4\n    memory_gb: 4")
    files["c_unknown_link.yaml"] = must_change(cluster, "latency_us: 2}", "latency_us: 2, lat: 1}")
    files["c_zero_nodes.yaml"] = must_change(cluster, "nodes: 2", "nodes: 0")
    files["c_negative_bw.yaml"] = must_change(cluster, "bandwidth_gb_s: 2,", "bandwidth_gb_s: -2,")
    files["c_nan_peak.yaml"] = must_change(cluster, "fp32: 0.05}", "fp32: .nan}")
    files["c_inf_memory.yaml"] = must_change(cluster, "memory_gib: 4", "memory_gib: .inf")
    files["c_node_list.yaml"] = must_change(cluster, "node:\n", "node:\n  - x: 1\n")
    files["c_empty.yaml"] = ""
    files["c_device_missing.yaml"] = must_change(dgx, "device: a100-sxm4-80gb",
                                                 "device: no-such-device")
    files["c_unknown_topology.yaml"] = must_change(dgx, "nvswitch: true", "nvswitch: true\n  nvswich: 1")
    files["c_unknown_tier.yaml"] = must_change(dgx, "{name: spine,", "{name: spine, nodez: 3,")
    os.makedirs(os.path.join(seed, "devices"))
    files["devices/d_unknown_model.yaml"] = must_change(device, "  gemm_efficiency:",
                                                        "  gem_efficiency: {value: 1}\n  gemm_efficiency:")
    files["devices/d_unknown_datasheet.yaml"] = must_change(device, "  sm_count: 108",
                                                            "  sm_count: 108\n  sm_counts: 108")
    files["devices/d_efficiency_zero.yaml"] = must_change(
        device, "gemm_efficiency: {value: 0.769925", "gemm_efficiency: {value: 0")
    files["devices/d_efficiency_nan.yaml"] = must_change(
        device, "gemm_efficiency: {value: 0.769925", "gemm_efficiency: {value: .nan")
    files["devices/d_truncated.yaml"] = device[:device.index("allreduce_curves:") + 40]
    for name in ("d_unknown_model", "d_unknown_datasheet", "d_efficiency_zero", "d_efficiency_nan",
                 "d_truncated"):
        files[f"cd_{name}.yaml"] = must_change(dgx, "device: a100-sxm4-80gb",
                                               f"device: devices/{name}.yaml")
    # A profile of tiny-gpt 1M1P1D (its compute events, 10 us each) and its corruptions.
    events = subprocess.run([eventsim, "events", "--model", "tiny-gpt", "--cluster", "cpu-local",
                             "--strategy", "1M1P1D", "--micro-batch", "1", "--global-batch", "1",
                             "--json"], capture_output=True, text=True, check=True).stdout
    signatures = re.findall(r'"signature": "([^"]+)"', events)
    head = ("schema_version: 1\nmetadata:\n  backend: cpu\n  date: \"2026-12-01T00:00:00Z\"\n"
            "  world_size: 4\n  ranks_per_node: 2\n  hosts: [a, b]\n  devices: [c, c, c, c]\n"
            "events:\n")
    rows = [f"  - signature: \"{s}\"\n    kind: compute\n"
            f"    time_us: {{median: 10, min: 9, max: 11, stddev: 0.5, count: 20}}\n"
            for s in signatures]
    profile = head + "".join(rows)
    files["profile.yaml"] = profile
    files["p_truncated.yaml"] = profile[:len(profile) // 2]
    files["p_missing_event.yaml"] = head + "".join(rows[1:])
    files["p_duplicated.yaml"] = profile + rows[2]
    files["p_zero_time.yaml"] = head + rows[0].replace("median: 10, min: 9", "median: 0, min: 0") \
        + "".join(rows[1:])
    files["p_negative_time.yaml"] = head + rows[0].replace("median: 10, min: 9",
                                                           "median: -10, min: -11") + "".join(rows[1:])
    files["p_nan_time.yaml"] = head + rows[0].replace("median: 10", "median: .nan") + "".join(rows[1:])
    files["p_unknown_key.yaml"] = head + rows[0].replace("kind: compute", "kind: compute\n    knd: x") \
        + "".join(rows[1:])
    files["p_unknown_meta.yaml"] = must_change(profile, "  world_size: 4", "  world_size: 4\n  word: 1")
    files["p_unknown_top.yaml"] = profile + "extra: 1\n"
    files["p_bad_signature.yaml"] = head + rows[0].replace("embedding_fwd", "embeding_fwd") + \
        "".join(rows[1:])
    files["p_empty.yaml"] = ""
    files["p_schema.yaml"] = must_change(profile, "schema_version: 1", "schema_version: 99")
    # Events files (eventprof --events).
    ev = read(os.path.join(ROOT, "tests/data/profiler_events.yaml"))
    files["e_ok.yaml"] = ev
    files["e_tab.yaml"] = must_change(ev, "events:\n", "events:\n\t- {signature: \"x\", count: 1}\n")
    files["e_unknown.yaml"] = must_change(ev, "count: 4}", "count: 4, cnt: 1}")
    files["e_bad_signature.yaml"] = must_change(ev, "gemm m=64", "gemm q=64")
    files["e_negative_count.yaml"] = must_change(ev, "count: 4}", "count: -4}")
    files["e_dup.yaml"] = ev + "  - {signature: \"gemm m=64 n=96 k=32 layout=nt dtype=fp32\", count: 4}\n"
    files["e_no_version.yaml"] = must_change(ev, "eventsim_events: 1\n", "")
    files["e_empty.yaml"] = ""
    # nccl-tests logs.
    log = read(os.path.join(ROOT, "tests/data/nccl_tests/all_reduce_perf_2x2.log"))
    files["all_reduce_perf.log"] = log
    cut = log.index("     2097152")
    files["n_truncated_row.log"] = log[:cut + 40]
    files["n_header_only.log"] = log[:log.index("     1048576")]
    files["n_empty.log"] = ""
    files["n_negative_time.log"] = must_change(log, "100.0   10.49", "-100.0   10.49")
    files["n_nan_time.log"] = must_change(log, "100.0   10.49", "nan   10.49")
    files["n_zero_size.log"] = must_change(log, "     1048576        262144", "           0        262144")
    files["alltoall_perf.log"] = read(os.path.join(ROOT, "tests/data/nccl_tests/alltoall_perf_8.log"))
    # Timelines, runs, torchtitan, args files, schedules.
    files["runs.csv"] = read(os.path.join(ROOT, "tests/data/fuzz_runs.csv"))
    files["runs_nan.csv"] = files["runs.csv"].replace("512.5", "nan")
    files["runs_short.csv"] = files["runs.csv"].rsplit(",", 3)[0] + "\n"
    files["runs_empty.csv"] = ""
    toml = read(os.path.join(ROOT, "tests/data/torchtitan/llama3_8b.toml"))
    files["t_unclosed.toml"] = toml.replace("[training]", "[training", 1) if "[training]" in toml \
        else "[job\n"
    files["t_empty.toml"] = ""
    files["args.sh"] = "torchrun --nproc_per_node 4 pretrain_gpt.py --tensor-model-parallel-size 0\n"
    files["args_unclosed.sh"] = "torchrun pretrain_gpt.py --micro-batch-size '1\n"
    files["sched_bad.csv"] = "rank,action\n0,F0\n0,X9\n"
    files["sched_empty.csv"] = ""
    files["measured.yaml"] = "# an earlier measurement that a failing run must not replace\n"
    files["measured.csv"] = "rank,a\n0,1\n"
    files["kineto_truncated.json"] = read(os.path.join(ROOT, "tests/data/kineto/tiny_gpt_cpu_step.json"))[:500]
    files["kineto_empty.json"] = ""
    files["kineto_list.json"] = "[1, 2]\n"
    files["cbor_garbage.cbor"] = "\xd9\xd9\xf7garbage"
    files["timeline_bad.csv"] = "rank,tp\nx,y\n"
    files["search_bad.json"] = "{\"candidates\": [\n"
    files["compare_short.csv"] = "rank,tp,pp\n0,0\n"
    subprocess.run([eventsim, "simulate", "--model", "tiny-gpt", "--cluster", "cpu-local",
                    "--strategy", "1M1P1D", "--micro-batch", "1", "--global-batch", "1",
                    "--fallback", "analytic", "--csv", os.path.join(seed, "timeline.csv")],
                   capture_output=True, check=True)
    for name, text in files.items():
        with open(os.path.join(seed, name), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(seed, "adir.yaml"))
    os.chmod(seed, 0o755)
    # A read-only folder for "unwritable" outputs (root ignores modes: checked where it matters).
    os.makedirs(os.path.join(seed, "readonly"))


# ---------------------------------------------------------------------------------------------
# The cases.

def eventsim_cases(E):
    C = []
    sim = [E, "simulate", "--cluster", "cpu-local", "--strategy", "1M1P1D", "--micro-batch", "1",
           "--global-batch", "1", "--fallback", "analytic"]
    tiny = ["--model", "tiny-gpt"]
    sim_t = sim + tiny
    sim4 = [E, "simulate", "--model", "tiny-gpt", "--cluster", "cpu-local", "--fallback", "analytic"]

    def add(entry, name, argv, *says, code=2):
        C.append(Case(entry, name, argv, says, code))

    # Model files through simulate (events and search share the loader).
    for f, say in [("m_tab", "m_tab.yaml"), ("m_unclosed", "m_unclosed.yaml"),
                   ("m_dup", "hidden_size"), ("m_list", "m_list.yaml"),
                   ("m_layers_map", "layers"), ("m_unknown_top", "hiden_size"),
                   ("m_unknown_layer", "cout"), ("m_type_str", "hidden_size"),
                   ("m_type_list", "num_heads"), ("m_zero", "num_heads"),
                   ("m_negative", "seq_length"), ("m_nan", "ffn_hidden_size"),
                   ("m_inf", "vocab_size"), ("m_huge", "seq_length"),
                   ("m_beyond_int", "num_heads"), ("m_float_int", "num_heads"),
                   ("m_heads_not_dividing", "num_heads"), ("m_layer_type", "decodr"),
                   ("m_empty", "m_empty.yaml"), ("m_comment_only", "m_comment_only.yaml"),
                   ("m_scalar", "m_scalar.yaml"), ("m_dropout_nan", "hidden_dropout"),
                   ("moe_topk_beyond", "moe_router_topk")]:
        add("simulate", f"model {f}", sim + ["--model", "{d}/" + f + ".yaml"], f + ".yaml", say)
    add("simulate", "model missing path", sim + ["--model", "{d}/nope.yaml"], "nope.yaml")
    add("simulate", "model directory", sim + ["--model", "{d}/adir.yaml"], "adir.yaml", "directory")
    add("simulate", "model /dev/null", sim + ["--model", "/dev/null"], "/dev/null")
    # Cluster and device files.
    for f, say in [("c_tab", "c_tab.yaml"), ("c_unclosed", "c_unclosed.yaml"), ("c_dup", "nodes"),
                   ("c_list", "c_list.yaml"), ("c_unknown_top", "nodez"),
                   ("c_unknown_node", "gpu"), ("c_unknown_device", "memory_gb"),
                   ("c_unknown_link", "lat"), ("c_zero_nodes", "nodes"),
                   ("c_negative_bw", "bandwidth_gb_s"), ("c_nan_peak", "fp32"),
                   ("c_inf_memory", "memory_gib"), ("c_node_list", "node"),
                   ("c_empty", "c_empty.yaml"), ("c_device_missing", "no-such-device"),
                   ("c_unknown_topology", "nvswich"), ("c_unknown_tier", "nodez"),
                   ("cd_d_unknown_model", "gem_efficiency"),
                   ("cd_d_unknown_datasheet", "sm_counts"),
                   ("cd_d_efficiency_zero", "gemm_efficiency"),
                   ("cd_d_efficiency_nan", "gemm_efficiency"),
                   ("cd_d_truncated", "d_truncated.yaml")]:
        add("simulate", f"cluster {f}", [E, "simulate", "--model", "tiny-gpt", "--strategy", "1M1P1D",
                                         "--micro-batch", "1", "--global-batch", "1",
                                         "--fallback", "analytic", "--cluster", "{d}/" + f + ".yaml"],
            say)
    add("simulate", "cluster missing path", sim_t[:2] + ["--model", "tiny-gpt", "--cluster", "nope"]
        + sim[4:], "nope")
    add("simulate", "cluster /dev/null", [E, "simulate", "--model", "tiny-gpt", "--cluster",
                                          "/dev/null", "--strategy", "1M1P1D", "--micro-batch", "1",
                                          "--global-batch", "1"], "/dev/null")
    # Profiles.
    prof = [E, "simulate", "--model", "tiny-gpt", "--cluster", "cpu-local", "--strategy", "1M1P1D",
            "--micro-batch", "1", "--global-batch", "1", "--profile"]
    for f, say in [("p_truncated", "p_truncated.yaml"), ("p_missing_event", "embedding_fwd"),
                   ("p_duplicated", "p_duplicated.yaml"), ("p_zero_time", "median"),
                   ("p_negative_time", "median"), ("p_nan_time", "median"),
                   ("p_unknown_key", "knd"), ("p_unknown_meta", "word"),
                   ("p_unknown_top", "extra"), ("p_bad_signature", "embeding_fwd"),
                   ("p_empty", "p_empty.yaml"), ("p_schema", "schema_version"),
                   ("adir", "adir.yaml"), ("nope", "nope.yaml")]:
        add("simulate", f"profile {f}", prof + ["{d}/" + f + ".yaml"], say)
    add("simulate", "profile /dev/null", prof + ["/dev/null"], "/dev/null")
    add("simulate", "profile garbage cbor", prof + ["{d}/cbor_garbage.cbor"], "cbor_garbage.cbor")
    # Strategies that cannot be.
    add("simulate", "tp not dividing heads", sim4 + ["--strategy", "3M1P1D", "--micro-batch", "1",
                                                    "--global-batch", "1"], "3M1P1D", "num_heads")
    add("simulate", "pp > layers", sim4 + ["--strategy", "1M8P1D", "--micro-batch", "1",
                                           "--global-batch", "8"], "P=8")
    add("simulate", "cp without flash attention", sim4 + ["--strategy", "1M1P1D", "--cp", "2",
                                                          "--micro-batch", "1", "--global-batch", "1"],
        "--cp", "flash_attention")
    add("simulate", "cp not dividing seq", [E, "simulate", "--model", "tiny-llama", "--cluster",
                                            "cpu-local", "--fallback", "analytic", "--strategy",
                                            "1M1P1D", "--cp", "3", "--micro-batch", "1",
                                            "--global-batch", "1"], "--cp", "3", "seq_length")
    add("simulate", "ep without experts", sim4 + ["--strategy", "1M1P2D", "--ep", "2",
                                                  "--micro-batch", "1", "--global-batch", "2"],
        "--ep", "experts")
    add("simulate", "virtual stages with gpipe", sim4 + ["--strategy", "1M2P1D", "--schedule", "gpipe",
                                                         "--virtual-stages", "2", "--micro-batch", "1",
                                                         "--global-batch", "4"], "--virtual-stages")
    add("simulate", "micro-batch not dividing", sim4 + ["--strategy", "1M1P2D", "--micro-batch", "3",
                                                        "--global-batch", "8"], "--global-batch", "8")
    add("simulate", "global batch 0", sim4 + ["--strategy", "1M1P1D", "--micro-batch", "1",
                                              "--global-batch", "0"], "--global-batch")
    add("simulate", "micro batch 0", sim4 + ["--strategy", "1M1P1D", "--micro-batch", "0",
                                             "--global-batch", "8"], "--micro-batch")
    add("simulate", "micro batch negative", sim4 + ["--strategy", "1M1P1D", "--micro-batch", "-1",
                                                    "--global-batch", "8"], "--micro-batch")
    add("simulate", "micro batch beyond int", sim4 + ["--strategy", "1M1P1D", "--micro-batch",
                                                      "4294967297", "--global-batch", "8"],
        "--micro-batch")
    add("simulate", "gpus beyond int", sim4 + ["--tp", "1", "--pp", "1", "--gpus", "4294967297",
                                               "--micro-batch", "1", "--global-batch", "8"], "--gpus")
    add("simulate", "gpus not a multiple", sim4 + ["--tp", "2", "--pp", "1", "--gpus", "3",
                                                   "--micro-batch", "1", "--global-batch", "8"],
        "--gpus", "3")
    add("simulate", "strategy malformed", sim4 + ["--strategy", "2X", "--micro-batch", "1",
                                                  "--global-batch", "8"], "--strategy", "2X")
    add("simulate", "strategy and tp", sim4 + ["--strategy", "1M1P1D", "--tp", "2", "--micro-batch",
                                               "1", "--global-batch", "8"], "--tp")
    add("simulate", "schedule unknown", sim_t + ["--schedule", "zigzag"], "--schedule", "zigzag")
    add("simulate", "schedule csv malformed", sim4 + ["--strategy", "1M2P1D", "--micro-batch", "1",
                                                      "--global-batch", "2", "--schedule",
                                                      "{d}/sched_bad.csv"], "sched_bad.csv")
    add("simulate", "schedule csv empty", sim4 + ["--strategy", "1M2P1D", "--micro-batch", "1",
                                                  "--global-batch", "2", "--schedule",
                                                  "{d}/sched_empty.csv"], "sched_empty.csv")
    add("simulate", "stage layers not summing", sim4 + ["--strategy", "1M2P1D", "--micro-batch", "1",
                                                        "--global-batch", "2", "--stage-layers",
                                                        "1,1"], "--stage-layers")
    add("simulate", "stage layers stray comma", sim4 + ["--strategy", "1M2P1D", "--micro-batch", "1",
                                                        "--global-batch", "2", "--stage-layers",
                                                        "2,,2"], "--stage-layers")
    add("simulate", "recompute unknown", sim_t + ["--recompute", "some"], "--recompute", "some")
    add("simulate", "zero 4", sim_t + ["--zero", "4"], "--zero", "4")
    add("simulate", "memory headroom 1", sim_t + ["--memory-headroom", "1"], "--memory-headroom")
    add("simulate", "memory headroom nan", sim_t + ["--memory-headroom", "nan"], "--memory-headroom")
    add("simulate", "memory headroom -0.1", sim_t + ["--memory-headroom", "-0.1"], "--memory-headroom")
    add("simulate", "dp-bucket-mb inf", sim_t + ["--dp-bucket-mb", "inf"], "--dp-bucket-mb")
    add("simulate", "dp-bucket-mb 1e308", sim_t + ["--dp-bucket-mb", "1e308"], "--dp-bucket-mb")
    add("simulate", "slow ranks stray comma", sim_t + ["--slow-ranks", "0:1.2,,"], "--slow-ranks")
    add("simulate", "slow ranks factor nan", sim_t + ["--slow-ranks", "0:nan"], "--slow-ranks")
    add("simulate", "slow ranks rank beyond", sim_t + ["--slow-ranks", "7:1.2"], "--slow-ranks", "7")
    add("simulate", "slow ranks factor 0", sim_t + ["--slow-ranks", "0:0"], "--slow-ranks")
    add("simulate", "ranks stray comma", sim_t + ["--ranks", "0,,1", "--csv", "{d}/o.csv"], "--ranks")
    add("simulate", "ranks beyond world", sim_t + ["--ranks", "5", "--csv", "{d}/o.csv"], "--ranks", "5")
    add("simulate", "train tokens garbage", sim_t + ["--train-tokens", "lots"], "--train-tokens")
    add("simulate", "train tokens 0", sim_t + ["--train-tokens", "0"], "--train-tokens")
    add("simulate", "train tokens negative", sim_t + ["--train-tokens", "-5T"], "--train-tokens")
    add("simulate", "gpu hour cost nan", sim_t + ["--train-tokens", "1T", "--gpu-hour-cost", "nan"],
        "--gpu-hour-cost")
    add("simulate", "iterations 0", sim_t + ["--jitter", "0.1", "--iterations", "0"], "--iterations")
    add("simulate", "jitter inf", sim_t + ["--jitter", "inf"], "--jitter")
    add("simulate", "host-op-us nan", sim_t + ["--host-op-us", "nan"], "--host-op-us")
    add("simulate", "attention kernel unknown", sim_t + ["--attention-kernel", "fa9"],
        "--attention-kernel", "fa9")
    add("simulate", "nccl algo unknown", sim_t + ["--nccl-algo", "mesh"], "--nccl-algo", "mesh")
    add("simulate", "nccl pxn 7", sim_t + ["--nccl-pxn-disable", "7"], "--nccl-pxn-disable")
    add("simulate", "unknown flag", sim_t + ["--micro-bacth", "1"], "--micro-bacth")
    add("simulate", "seq-length 0", sim_t + ["--seq-length", "0"], "--seq-length")
    add("simulate", "num-layers beyond int", sim_t + ["--num-layers", "4294967297"], "--num-layers")
    add("simulate", "hidden-size not dividing heads", sim_t + ["--hidden-size", "66"], "hidden")
    add("simulate", "args file zero tp", [E, "simulate", "--model", "tiny-gpt", "--cluster",
                                          "cpu-local", "--args-file", "{d}/args.sh", "--fallback",
                                          "analytic"], "--tp", "--args-file {d}/args.sh as --tensor-model-parallel-size")
    add("simulate", "args file unclosed quote", [E, "simulate", "--model", "tiny-gpt", "--cluster",
                                                 "cpu-local", "--args-file", "{d}/args_unclosed.sh"],
        "args_unclosed.sh")
    add("simulate", "args file missing", [E, "simulate", "--model", "tiny-gpt", "--cluster",
                                          "cpu-local", "--args-file", "{d}/nope.sh"], "nope.sh")
    add("simulate", "torchtitan toml unclosed", [E, "simulate", "--model", "{d}/t_unclosed.toml",
                                                 "--cluster", "dgx-h100"], "t_unclosed.toml")
    add("simulate", "torchtitan toml empty", [E, "simulate", "--model", "{d}/t_empty.toml",
                                              "--cluster", "dgx-h100"], "t_empty.toml")
    # Outputs: a bad input must not replace an earlier output; a missing folder is exit 1.
    add("simulate", "bad input, existing csv kept", sim + ["--model", "{d}/m_tab.yaml", "--csv",
                                                          "{d}/measured.csv"], "m_tab.yaml")
    add("simulate", "csv in missing folder", sim_t + ["--csv", "{d}/no/dir/t.csv"], "{d}/no/dir/t.csv",
        code=1)
    add("simulate", "trace is a directory", sim_t + ["--trace", "{d}/adir.yaml"], "adir.yaml")
    add("simulate", "chakra into a file", sim_t + ["--chakra", "{d}/measured.csv"], "--chakra",
        code=2)
    add("simulate", "csv empty name", sim_t + ["--csv", ""], "--csv")
    add("simulate", "seed without jitter", sim_t + ["--seed", "5"], "--seed", "--jitter")
    add("simulate", "chakra prefix without chakra", sim_t + ["--chakra-prefix", "x"],
        "--chakra-prefix", "--chakra")
    add("simulate", "ranks without an output", sim_t + ["--ranks", "0"], "--ranks 0", "--csv")
    add("simulate", "link-csv in missing folder", sim_t + ["--link-csv", "{d}/no/l.csv"],
        "{d}/no/l.csv", code=1)

    # events
    ev = [E, "events", "--model", "tiny-gpt", "--cluster", "cpu-local"]
    add("events", "gpus beyond int", ev + ["--gpus", "4294967297", "--global-batch", "8"], "--gpus")
    add("events", "global batch 0", ev + ["--gpus", "4", "--global-batch", "0"], "--global-batch")
    add("events", "micro-batches stray comma", ev + ["--gpus", "4", "--global-batch", "8",
                                                     "--micro-batches", "1,,2"], "--micro-batches")
    add("events", "micro-batches empty", ev + ["--gpus", "4", "--global-batch", "8",
                                               "--micro-batches", ","], "--micro-batches")
    add("events", "micro-batch not dividing", ev + ["--strategy", "1M1P2D", "--micro-batch", "3",
                                                    "--global-batch", "8"], "--global-batch")
    add("events", "pp > layers", ev + ["--strategy", "1M8P1D", "--micro-batch", "1",
                                       "--global-batch", "8"], "P=8")
    add("events", "output into a folder", ev + ["--strategy", "1M1P1D", "--micro-batch", "1",
                                                "--global-batch", "1", "-o", "{d}/adir.yaml"],
        "adir.yaml")
    add("events", "bad model keeps -o", [E, "events", "--model", "{d}/m_dup.yaml", "--cluster",
                                         "cpu-local", "--strategy", "1M1P1D", "--micro-batch", "1",
                                         "--global-batch", "1", "-o", "{d}/measured.yaml"], "m_dup.yaml")
    add("events", "no strategy fits gpus", ev + ["--gpus", "3", "--global-batch", "1",
                                                 "--micro-batches", "2"], "--gpus")

    # search
    se = [E, "search", "--model", "tiny-gpt", "--cluster", "cpu-local", "--gpus", "4"]
    se8 = se + ["--global-batch", "8"]
    add("search", "gpus beyond int", [E, "search", "--model", "tiny-gpt", "--cluster", "cpu-local",
                                      "--gpus", "4294967297", "--global-batch", "8"], "--gpus")
    add("search", "gpus 0", [E, "search", "--model", "tiny-gpt", "--cluster", "cpu-local", "--gpus",
                             "0", "--global-batch", "8"], "--gpus")
    add("search", "global batch 0", se + ["--global-batch", "0"], "--global-batch")
    add("search", "global batch beyond int", se + ["--global-batch", "4294967297"], "--global-batch")
    add("search", "cp stray comma", se8 + ["--cp", "1,,2"], "--cp")
    add("search", "cp only comma", se8 + ["--cp", ","], "--cp")
    add("search", "ep stray comma", se8 + ["--ep", "1,"], "--ep")
    add("search", "micro-batch stray comma", se8 + ["--micro-batch", "1,,2"], "--micro-batch")
    add("search", "micro-batch 0", se8 + ["--micro-batch", "0"], "--micro-batch")
    add("search", "schedule empty entry", se8 + ["--schedule", "gpipe,"], "--schedule")
    add("search", "schedule unknown", se8 + ["--schedule", "zigzag"], "--schedule", "zigzag")
    add("search", "recompute unknown", se8 + ["--recompute", "none,some"], "--recompute", "some")
    add("search", "virtual stages 0", se8 + ["--virtual-stages", "0"], "--virtual-stages")
    add("search", "virtual stages stray comma", se8 + ["--virtual-stages", "2,,3"], "--virtual-stages")
    add("search", "zero 4", se8 + ["--zero", "4"], "--zero")
    add("search", "zero stray comma", se8 + ["--zero", "0,"], "--zero")
    add("search", "sequence parallel maybe", se8 + ["--sequence-parallel", "maybe"],
        "--sequence-parallel")
    add("search", "dp overlap empty", se8 + ["--dp-overlap", ""], "--dp-overlap")
    add("search", "offload unknown", se8 + ["--offload", "disk"], "--offload", "disk")
    add("search", "top -1", se8 + ["--top", "-1"], "--top")
    add("search", "threads huge", se8 + ["--threads", "100000000"], "--threads")
    add("search", "threads beyond uint", se8 + ["--threads", "4294967297"], "--threads")
    add("search", "threads negative", se8 + ["--threads", "-1"], "--threads")
    add("search", "memory headroom 1", se8 + ["--memory-headroom", "1"], "--memory-headroom")
    add("search", "memory headroom nan", se8 + ["--memory-headroom", "nan"], "--memory-headroom")
    add("search", "memory headroom -1", se8 + ["--memory-headroom", "-1"], "--memory-headroom")
    add("search", "ep without experts", se8 + ["--ep", "1,2"], "--ep 2", "no experts")
    add("search", "cp without flash attention", se8 + ["--cp", "1,2"], "--cp 2", "flash_attention")
    add("search", "cp dividing no gpus", [E, "search", "--model", "tiny-llama", "--cluster",
                                          "cpu-local", "--gpus", "4", "--global-batch", "8", "--cp",
                                          "3"], "--gpus 4", "--cp 3")
    add("search", "ep not dividing experts", [E, "search", "--model", "tiny-moe", "--cluster",
                                              "cpu-local", "--gpus", "4", "--global-batch", "8",
                                              "--ep", "3"], "--ep 3", "num_experts")
    add("search", "etp without experts", se8 + ["--etp", "1"], "--etp 1", "experts")
    add("search", "interleaved on one gpu", [E, "search", "--model", "tiny-gpt", "--cluster",
                                             "cpu-local", "--gpus", "1", "--global-batch", "8",
                                             "--schedule", "interleaved"], "--gpus 1",
        "--schedule interleaved")
    add("search", "every candidate invalid", se + ["--global-batch", "3", "--micro-batch", "2"],
        "no valid strategy", "--global-batch 3")
    add("search", "cp comm type without cp", se8 + ["--cp-comm-type", "a2a"], "--cp-comm-type a2a",
        "--cp 1")
    add("search", "tp comm overlap without sp", se8 + ["--tp-comm-overlap", "--sequence-parallel",
                                                       "off"], "--tp-comm-overlap",
        "--sequence-parallel off")
    add("search", "param gather without zero", se8 + ["--overlap-param-gather", "--zero", "0"],
        "--overlap-param-gather", "--zero 0")
    add("search", "virtual stages without interleaved", se8 + ["--virtual-stages", "2", "--schedule",
                                                               "dapple"], "--virtual-stages 2",
        "--schedule dapple")
    add("search", "uneven stages only interleaved", se8 + ["--uneven-stages", "2", "--schedule",
                                                           "interleaved"], "--uneven-stages 2")
    add("search", "uneven stages -1", se8 + ["--uneven-stages", "-1"], "--uneven-stages")
    add("search", "cp a2a size 1", se8 + ["--cp-a2a-size", "1"], "--cp-a2a-size")
    add("search", "write-events in missing folder", se8 + ["--write-events", "{d}/no/e.yaml"],
        "{d}/no/e.yaml", code=1)
    add("search", "csv into a folder", se8 + ["--csv", "{d}/adir.yaml"], "adir.yaml")
    add("search", "bad model keeps csv", [E, "search", "--model", "{d}/m_nan.yaml", "--cluster",
                                          "cpu-local", "--gpus", "4", "--global-batch", "8", "--csv",
                                          "{d}/measured.csv"], "m_nan.yaml")
    add("search", "profile truncated", se8 + ["--profile", "{d}/p_truncated.yaml"], "p_truncated.yaml")

    # collective
    co = [E, "collective", "--cluster", "dgx-a100", "--op", "all-reduce"]
    add("collective", "gpus 0", co + ["--gpus", "0", "--bytes", "1M"], "--gpus")
    add("collective", "gpus 1", co + ["--gpus", "1", "--bytes", "1M"], "--gpus")
    add("collective", "gpus beyond int", co + ["--gpus", "4294967297", "--bytes", "1M"], "--gpus")
    add("collective", "gpus negative", co + ["--gpus", "-8", "--bytes", "1M"], "--gpus")
    add("collective", "bytes garbage", co + ["--gpus", "8", "--bytes", "lots"], "--bytes", "lots")
    add("collective", "bytes 0", co + ["--gpus", "8", "--bytes", "0"], "--bytes")
    add("collective", "bytes negative", co + ["--gpus", "8", "--bytes", "-1M"], "--bytes")
    add("collective", "bytes stray comma", co + ["--gpus", "8", "--bytes", "1M,,2M"], "--bytes")
    add("collective", "bytes huge", co + ["--gpus", "8", "--bytes", "1e30"], "--bytes")
    add("collective", "min above max", co + ["--gpus", "8", "--min-bytes", "1G", "--max-bytes", "1M"],
        "--min-bytes")
    add("collective", "min without max", co + ["--gpus", "8", "--min-bytes", "1M"], "--max-bytes")
    add("collective", "bytes and min", co + ["--gpus", "8", "--bytes", "1M", "--min-bytes", "1M",
                                             "--max-bytes", "2M"], "--bytes")
    add("collective", "gpus-per-node not dividing", co + ["--gpus", "12", "--gpus-per-node", "8",
                                                          "--bytes", "1M"], "--gpus")
    add("collective", "op unknown", [E, "collective", "--cluster", "dgx-a100", "--op", "all-scatter",
                                     "--gpus", "8", "--bytes", "1M"], "--op")
    add("collective", "measured truncated", co + ["--gpus", "4", "--bytes", "1M", "--measured",
                                                  "{d}/n_truncated_row.log"], "n_truncated_row.log")
    add("collective", "measured other op", [E, "collective", "--cluster", "dgx-a100", "--op",
                                            "all-gather", "--gpus", "4", "--gpus-per-node", "2",
                                            "--measured", "{d}/all_reduce_perf.log"],
        "all_reduce_perf.log:3", "--op allgather")
    add("collective", "measured other group", co + ["--gpus", "8", "--measured",
                                                    "{d}/all_reduce_perf.log"],
        "--measured", "4 ranks over 2 node(s)")
    add("collective", "measured missing", co + ["--gpus", "4", "--bytes", "1M", "--measured",
                                                "{d}/nope.log"], "nope.log")
    add("collective", "cluster bad", [E, "collective", "--cluster", "{d}/c_dup.yaml", "--op",
                                      "all-reduce", "--gpus", "8", "--bytes", "1M"], "c_dup.yaml")

    # import-nccl-tests
    im = [E, "import-nccl-tests"]
    for f, say in [("n_truncated_row", "n_truncated_row.log"), ("n_header_only", "n_header_only.log"),
                   ("n_empty", "n_empty.log"), ("n_negative_time", "n_negative_time.log"),
                   ("n_nan_time", "n_nan_time.log"), ("n_zero_size", "n_zero_size.log")]:
        add("import-nccl-tests", f, im + ["{d}/" + f + ".log", "-o", "{d}/measured.yaml",
                                          "--append"], say)
    add("import-nccl-tests", "missing log", im + ["{d}/nope.log", "-o", "{d}/out.yaml"], "nope.log")
    add("import-nccl-tests", "log is a directory", im + ["{d}/adir.yaml", "-o", "{d}/out.yaml"],
        "adir.yaml")
    add("import-nccl-tests", "collective disagrees", im + ["{d}/all_reduce_perf.log", "--collective",
                                                           "alltoall", "-o", "{d}/out.yaml"],
        "--collective")
    add("import-nccl-tests", "collective unknown", im + ["{d}/all_reduce_perf.log", "--collective",
                                                         "allscatter", "-o", "{d}/out.yaml"],
        "--collective", "allscatter")
    add("import-nccl-tests", "group disagrees", im + ["{d}/all_reduce_perf.log", "--group", "8",
                                                      "-o", "{d}/out.yaml"], "--group")
    add("import-nccl-tests", "nodes disagrees", im + ["{d}/all_reduce_perf.log", "--nodes", "1",
                                                      "-o", "{d}/out.yaml"], "--nodes 1", "2 host")
    add("import-nccl-tests", "nodes beyond group", im + ["{d}/alltoall_perf.log", "--group", "4",
                                                         "--nodes", "5", "-o", "{d}/out.yaml"],
        "--nodes")
    add("import-nccl-tests", "as-dtype unknown", im + ["{d}/all_reduce_perf.log", "--as-dtype",
                                                       "fp12", "-o", "{d}/out.yaml"], "fp12")
    add("import-nccl-tests", "append to corrupt", im + ["{d}/all_reduce_perf.log", "--append", "-o",
                                                        "{d}/p_truncated.yaml"], "p_truncated.yaml")
    add("import-nccl-tests", "output missing folder", im + ["{d}/all_reduce_perf.log", "-o",
                                                            "{d}/no/out.yaml"], "{d}/no/out.yaml",
        code=1)

    # calibrate
    ca = [E, "calibrate", "--cluster", "dgx-a100"]
    add("calibrate", "runs nan time", ca + ["--runs", "{d}/runs_nan.csv", "-o", "{d}/measured.yaml"],
        "runs_nan.csv")
    add("calibrate", "runs short row", ca + ["--runs", "{d}/runs_short.csv", "-o", "{d}/measured.yaml"],
        "runs_short.csv")
    add("calibrate", "runs empty", ca + ["--runs", "{d}/runs_empty.csv", "-o", "{d}/measured.yaml"],
        "runs_empty.csv")
    add("calibrate", "runs missing", ca + ["--runs", "{d}/nope.csv", "-o", "{d}/out.yaml"], "nope.csv")
    add("calibrate", "nothing to fit", ca + ["-o", "{d}/out.yaml"], "--runs")
    add("calibrate", "collectives truncated", ca + ["--collectives", "{d}/p_truncated.yaml", "-o",
                                                    "{d}/measured.yaml"], "p_truncated.yaml")
    add("calibrate", "kernels and runs", ca + ["--kernels", "{d}/profile.yaml", "--runs",
                                               "{d}/runs.csv", "-o", "{d}/out.yaml"], "--kernels")
    add("calibrate", "fit-where malformed", ca + ["--runs", "{d}/runs.csv", "--fit-where", "hidden",
                                                  "-o", "{d}/out.yaml"], "--fit-where")
    add("calibrate", "fit-where unknown key", ca + ["--runs", "{d}/runs.csv", "--fit-where",
                                                    "colour=red", "-o", "{d}/out.yaml"], "colour")
    add("calibrate", "cross-validate unknown", ca + ["--runs", "{d}/runs.csv", "--cross-validate",
                                                     "colour", "-o", "{d}/out.yaml"], "colour")
    add("calibrate", "dtype unknown", ca + ["--runs", "{d}/runs.csv", "--dtype", "fp12", "-o",
                                            "{d}/out.yaml"], "fp12")
    add("calibrate", "schedule unknown", ca + ["--runs", "{d}/runs.csv", "--schedule", "zigzag", "-o",
                                               "{d}/out.yaml"], "zigzag")
    add("calibrate", "threads huge", ca + ["--runs", "{d}/runs.csv", "--threads", "100000", "-o",
                                           "{d}/out.yaml"], "--threads")
    add("calibrate", "output into a folder", ca + ["--runs", "{d}/runs.csv", "-o", "{d}/adir.yaml"],
        "adir.yaml")
    add("calibrate", "sustained gemm garbage", ca + ["--sustained-gemm", "{d}/p_empty.yaml", "-o",
                                                     "{d}/out.yaml"], "p_empty.yaml")

    # compare
    cm = [E, "compare"]
    add("compare", "predicted missing", cm + ["--predicted", "{d}/nope.csv", "--measured",
                                              "{d}/measured.csv"], "nope.csv")
    add("compare", "measured short row", cm + ["--predicted", "{d}/compare_short.csv", "--measured",
                                               "{d}/compare_short.csv"], "compare_short.csv")
    add("compare", "unpaired", cm + ["--predicted", "{d}/measured.csv", "{d}/measured.csv",
                                     "--measured", "{d}/measured.csv"], "--measured")
    add("compare", "tie-pct negative", cm + ["--predicted", "{d}/timeline.csv", "--measured",
                                             "{d}/timeline.csv", "--tie-pct", "-1"], "--tie-pct")
    add("compare", "tie-pct nan", cm + ["--predicted", "{d}/timeline.csv", "--measured",
                                        "{d}/timeline.csv", "--tie-pct", "nan"], "--tie-pct")
    add("compare", "label count", cm + ["--predicted", "{d}/timeline.csv", "--measured",
                                        "{d}/timeline.csv", "--label", "a", "--label", "b"],
        "--label")
    add("compare", "predicted empty", cm + ["--predicted", "{d}/runs_empty.csv", "--measured",
                                            "{d}/runs_empty.csv"], "runs_empty.csv")

    # convert-profile
    cv = [E, "convert-profile"]
    add("convert-profile", "input truncated", cv + ["{d}/p_truncated.yaml", "{d}/measured.yaml"],
        "p_truncated.yaml")
    add("convert-profile", "input garbage cbor", cv + ["{d}/cbor_garbage.cbor", "{d}/out.yaml"],
        "cbor_garbage.cbor")
    add("convert-profile", "input empty", cv + ["{d}/p_empty.yaml", "{d}/out.yaml"], "p_empty.yaml")
    add("convert-profile", "input missing", cv + ["{d}/nope.yaml", "{d}/out.yaml"], "nope.yaml")
    add("convert-profile", "format unknown", cv + ["{d}/profile.yaml", "{d}/out.x", "--format", "xml"],
        "--format")
    add("convert-profile", "output missing folder", cv + ["{d}/profile.yaml", "{d}/no/out.cbor"],
        "{d}/no/out.cbor", code=1)
    add("convert-profile", "output is the input folder", cv + ["{d}/profile.yaml", "{d}/adir.yaml"],
        "adir.yaml")

    # import-kineto
    ik = [E, "import-kineto", "--model", "tiny-gpt", "--cluster", "cpu-local", "--strategy", "1M1P1D",
          "--micro-batch", "1", "--global-batch", "1", "-o", "{d}/measured.yaml"]
    add("import-kineto", "trace truncated", ik + ["{d}/kineto_truncated.json"], "kineto_truncated.json")
    add("import-kineto", "trace empty", ik + ["{d}/kineto_empty.json"], "kineto_empty.json")
    add("import-kineto", "trace a list", ik + ["{d}/kineto_list.json"], "kineto_list.json")
    add("import-kineto", "trace missing", ik + ["{d}/nope.json"], "nope.json")

    # list
    add("list", "unknown kind", [E, "list", "gpus"], "gpus")
    # the top level
    add("eventsim", "unknown command", [E, "simulat"], "simulat")
    add("eventsim", "no command", [E], "command")
    add("eventsim", "unknown flag", [E, "--verbose"], "--verbose")
    return C


def mpi_cases(build, mpirun):
    prof = os.path.join(build, "profiler/eventprof")
    run = os.path.join(build, "runner/eventrun")
    mp = [mpirun, "--oversubscribe", "-np", "4"]
    C = []

    def add(entry, tool, name, argv, *says, code=2):
        C.append(Case(entry, name, argv, says, code, mpi=True, tool=tool))

    ep = mp + [prof, "--backend", "cpu", "--ranks-per-node", "2"]
    for f, say in [("e_tab", "e_tab.yaml"), ("e_unknown", "cnt"), ("e_bad_signature", "got 'q'"),
                   ("e_negative_count", "count"), ("e_dup", "appears twice"),
                   ("e_no_version", "eventsim_events"), ("e_empty", "e_empty.yaml"),
                   ("nope", "nope.yaml"), ("adir", "adir.yaml")]:
        add("eventprof", "eventprof", f"events {f}", ep + ["--events", "{d}/" + f + ".yaml", "-o",
                                                             "{d}/measured.yaml"], say)
    add("eventprof", "eventprof", "resume a corrupt profile",
        ep + ["--events", "{d}/e_ok.yaml", "--resume", "-o", "{d}/p_truncated.yaml"], "p_truncated.yaml")
    add("eventprof", "eventprof", "model bad", ep + ["--model", "{d}/m_tab.yaml", "--cluster", "cpu-local",
                                                  "--strategy", "1M1P1D", "--micro-batch", "1",
                                                  "--global-batch", "1", "-o", "{d}/measured.yaml"],
        "m_tab.yaml")
    add("eventprof", "eventprof", "strategy and events", ep + ["--events", "{d}/e_ok.yaml", "--strategy",
                                                            "1M1P1D", "-o", "{d}/out.yaml"], "--events")
    add("eventprof", "eventprof", "nothing to measure", ep + ["-o", "{d}/out.yaml"], "--events")
    add("eventprof", "eventprof", "comm timeout nan", ep + ["--events", "{d}/e_ok.yaml",
                                                         "--comm-timeout", "nan", "-o", "{d}/out.yaml"],
        "--comm-timeout")
    add("eventprof", "eventprof", "repeats beyond int", ep + ["--events", "{d}/e_ok.yaml", "--repeats",
                                                           "4294967297", "-o", "{d}/out.yaml"],
        "--repeats")
    add("eventprof", "eventprof", "ranks-per-node not dividing", ep[:-2] + ["--ranks-per-node", "3",
                                                                         "--events", "{d}/e_ok.yaml",
                                                                         "-o", "{d}/out.yaml"],
        "--ranks-per-node")
    add("eventprof", "eventprof", "micro-batches stray comma",
        ep + ["--model", "tiny-gpt", "--cluster", "cpu-local", "--gpus", "4", "--global-batch", "8",
              "--micro-batches", "1,,2", "-o", "{d}/out.yaml"], "--micro-batches")
    add("eventprof", "eventprof", "output in missing folder", ep + ["--events", "{d}/e_ok.yaml", "-o",
                                                                 "{d}/no/p.yaml"], "{d}/no/p.yaml",
        code=1)
    er = mp[:3] + ["2", run]
    add("eventrun", "eventrun", "model bad", er + ["--model", "{d}/m_unknown_top.yaml", "--cluster",
                                                "cpu-local", "--strategy", "1M2P1D", "--micro-batch",
                                                "1", "--global-batch", "2", "--csv",
                                                "{d}/measured.csv"], "hiden_size")
    add("eventrun", "eventrun", "world disagrees", er + ["--model", "tiny-gpt", "--cluster", "cpu-local",
                                                      "--strategy", "1M4P1D", "--micro-batch", "1",
                                                      "--global-batch", "4", "--csv",
                                                      "{d}/measured.csv"], "1M4P1D")
    add("eventrun", "eventrun", "iterations 0", er + ["--model", "tiny-gpt", "--cluster", "cpu-local",
                                                   "--strategy", "1M2P1D", "--micro-batch", "1",
                                                   "--global-batch", "2", "--iterations", "0",
                                                   "--csv", "{d}/o.csv"], "--iterations")
    add("eventrun", "eventrun", "micro-batch not dividing", er + ["--model", "tiny-gpt", "--cluster",
                                                               "cpu-local", "--strategy", "1M2P1D",
                                                               "--micro-batch", "3",
                                                               "--global-batch", "8", "--csv",
                                                               "{d}/o.csv"], "--global-batch")
    ev2 = er + ["--model", "tiny-gpt", "--cluster", "cpu-local", "--strategy", "1M2P1D",
                "--micro-batch", "1", "--global-batch", "2"]
    add("eventrun", "eventrun", "cluster bad", er + ["--model", "tiny-gpt", "--cluster",
                                                  "{d}/c_unknown_node.yaml", "--strategy", "1M2P1D",
                                                  "--micro-batch", "1", "--global-batch", "2",
                                                  "--csv", "{d}/measured.csv"], "node.gpu")
    add("eventrun", "eventrun", "schedule csv malformed", ev2 + ["--schedule", "{d}/sched_bad.csv",
                                                              "--csv", "{d}/measured.csv"],
        "sched_bad.csv")
    add("eventrun", "eventrun", "comm timeout inf", ev2 + ["--comm-timeout", "inf", "--csv",
                                                        "{d}/o.csv"], "--comm-timeout")
    add("eventrun", "eventrun", "ranks-per-node 0", ev2 + ["--ranks-per-node", "0", "--csv",
                                                        "{d}/o.csv"], "--ranks-per-node")
    add("eventrun", "eventrun", "trace into a folder", ev2 + ["--trace", "{d}/adir.yaml"], "adir.yaml")
    add("eventrun", "eventrun", "csv in missing folder", ev2 + ["--csv", "{d}/no/o.csv"],
        "{d}/no/o.csv", code=1)
    return C


def python_cases(build):
    C = []
    py = os.path.join(build, "python")
    if not os.path.isdir(os.path.join(py, "eventsim")) or not any(
            f.startswith("_core") for f in os.listdir(os.path.join(py, "eventsim"))):
        return C
    runner = ("import sys; sys.path.insert(0, %r); import eventsim\n"
              "try:\n    %s\nexcept ValueError as e:\n"
              "    print('ValueError:', e, file=sys.stderr); sys.exit(2)\n")
    for name, call, say in [
            ("model with a tab", "eventsim.simulate(model='{d}/m_tab.yaml', cluster='cpu-local', "
             "strategy='1M1P1D', micro_batch=1, global_batch=1)", "m_tab.yaml"),
            ("truncated profile", "eventsim.simulate(model='tiny-gpt', cluster='cpu-local', "
             "strategy='1M1P1D', micro_batch=1, global_batch=1, profile='{d}/p_truncated.yaml')",
             "p_truncated.yaml"),
            ("search stray comma", "eventsim.search(model='tiny-gpt', cluster='cpu-local', gpus=4, "
             "global_batch=8, cp='1,,2')", "--cp"),
            ("search threads huge", "eventsim.search(model='tiny-gpt', cluster='cpu-local', gpus=4, "
             "global_batch=8, threads=100000000)", "--threads"),
            ("args file missing", "eventsim.simulate(model='tiny-gpt', cluster='cpu-local', "
             "strategy='1M1P1D', micro_batch=1, global_batch=1, args_file='{d}/nope.sh')",
             "nope.sh"),
            ("args file zero tp", "eventsim.simulate(model='tiny-gpt', cluster='cpu-local', "
             "args_file='{d}/args.sh')", "--args-file {d}/args.sh as --tensor-model-parallel-size"),
            ("torchtitan toml unclosed", "eventsim.simulate(model='{d}/t_unclosed.toml', "
             "cluster='dgx-h100')", "t_unclosed.toml"),
            ("events bad cluster", "eventsim.events(model='tiny-gpt', cluster='{d}/c_dup.yaml', "
             "strategy='1M1P1D', micro_batch=1, global_batch=1)", "c_dup.yaml"),
            ("list unknown kind", "eventsim.list('gpus')", "gpus"),
            ("calibrate runs nan", "eventsim.calibrate(cluster='dgx-a100', runs='{d}/runs_nan.csv', "
             "output='{d}/measured.yaml')", "runs_nan.csv"),
            ("collective measured other op", "eventsim.collective(cluster='dgx-a100', "
             "op='all-gather', gpus=4, gpus_per_node=2, measured='{d}/all_reduce_perf.log')",
             "--op allgather"),
            ("search all invalid", "eventsim.search(model='tiny-gpt', cluster='cpu-local', gpus=4, "
             "global_batch=3, micro_batch=2)", "no valid strategy"),
            ("collective bytes 0", "eventsim.collective(cluster='dgx-a100', op='all-reduce', gpus=8, "
             "bytes=['0'])", "--bytes"),
            ("gpus beyond int", "eventsim.simulate(model='tiny-gpt', cluster='cpu-local', tp=1, pp=1,"
             " gpus=4294967297, micro_batch=1, global_batch=8)", "--gpus"),
            ("global batch nan", "eventsim.simulate(model='tiny-gpt', cluster='cpu-local', "
             "strategy='1M1P1D', micro_batch=1, global_batch=float('nan'))", "--global-batch")]:
        C.append(Case("python", name, [sys.executable, "-c", runner % (py, call)], [say]))
    return C


def script_cases():
    s = os.path.join(ROOT, "scripts")
    C = []
    for script, name, args, say in [
            ("plot_timeline.py", "missing csv", ["{d}/nope.csv", "-o", "{d}/t.png"], "nope.csv"),
            ("plot_timeline.py", "bad csv", ["{d}/timeline_bad.csv", "-o", "{d}/t.png"],
             "timeline_bad.csv"),
            ("plot_timeline.py", "empty csv", ["{d}/runs_empty.csv", "-o", "{d}/t.png"],
             "runs_empty.csv"),
            ("plot_search.py", "missing json", ["{d}/nope.json", "-o", "{d}/s.png"], "nope.json"),
            ("plot_search.py", "truncated json", ["{d}/search_bad.json", "-o", "{d}/s.png"],
             "search_bad.json"),
            ("check_timeline.py", "missing csv", ["--measured", "{d}/nope.csv", "--expected",
                                                  "{d}/nope.csv"], "nope.csv"),
            ("check_timeline.py", "bad csv", ["--measured", "{d}/timeline_bad.csv", "--expected",
                                              "{d}/timeline_bad.csv"], "timeline_bad.csv")]:
        C.append(Case(script, name, [sys.executable, os.path.join(s, script)] + args, [say]))
    return C


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--entry", action="append", help="only these entry points (repeatable)")
    parser.add_argument("--mpirun", default=shutil.which("mpirun"))
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help=f"seconds before a case counts as a hang (default {TIMEOUT_S})")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case's line")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    eventsim = os.path.join(build, "eventsim")
    cases = eventsim_cases(eventsim) + python_cases(build) + script_cases()
    if args.mpirun and os.path.exists(os.path.join(build, "profiler/eventprof")):
        cases += mpi_cases(build, args.mpirun)
    if args.entry:
        cases = [c for c in cases if c.entry in args.entry]
    if args.list:
        for c in cases:
            print(f"{c.entry}: {c.name}")
        return 0
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    work = tempfile.mkdtemp(prefix="bad_input_sweep.")
    try:
        write_seed(os.path.join(work, "seed"), eventsim)
        total = collections.Counter()
        failed = collections.Counter()
        for case in cases:
            problems, line = run_case(case, work, env, args.timeout)
            total[case.entry] += 1
            if problems:
                failed[case.entry] += 1
                print(f"FAIL {case.entry}: {case.name}: {'; '.join(problems)}\n     {line}")
            elif args.verbose:
                print(f"ok   {case.entry}: {case.name}: {line}")
        for entry in total:
            print(f"{entry}: {total[entry] - failed[entry]}/{total[entry]} cases hold")
        print(f"all: {sum(total.values()) - sum(failed.values())}/{sum(total.values())}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
