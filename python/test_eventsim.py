"""The eventsim Python module against the eventsim CLI: the same arguments give the same report.

Run through ctest (python.module), which sets PYTHONPATH to the module's folder and EVSIM_CLI to
the eventsim binary. Small models and fallback='analytic' keep it to a few seconds.
"""

import json
import os
import subprocess

import pytest

import eventsim

CLI = os.environ.get("EVSIM_CLI", "build/eventsim")


def flag_args(kwargs):
    """The CLI's arguments for the keywords, spelled out by hand (not by the module's code)."""
    args = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def cli(command, kwargs, check=True):
    result = subprocess.run([CLI, command, *flag_args(kwargs)] + (["--json"] if check else []),
                            capture_output=True, text=True, check=False)
    if check:
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)
    return result


STRATEGIES = [
    dict(model="gpt2-345m", cluster="dgx-a100", tp=2, pp=2, dp=4, micro_batch=2, global_batch=64),
    dict(model="gpt2-345m", cluster="dgx-a100", tp=4, pp=2, dp=2, micro_batch=1, global_batch=32,
         sequence_parallel=True, recompute="selective", schedule="1f1b"),
    dict(model="gpt2-345m", cluster="dgx-a100", tp=2, pp=2, dp=4, micro_batch=2, global_batch=64,
         schedule="zbv"),
    dict(model="gpt2-345m", cluster="dgx-a100", tp=2, pp=2, dp=4, micro_batch=2, global_batch=64,
         schedule="dualpipev"),
    # Megatron's flag names and a model override, beside ours.
    dict(model="tiny-llama", cluster="dgx-h100", tensor_model_parallel_size=2,
         pipeline_model_parallel_size=2, dp=2, micro_batch_size=1, global_batch_size=16,
         num_layers=8, zero=1),
    # Megatron's two overlap flags (issue 31, item 2), as keywords.
    dict(model="gpt2-345m", cluster="dgx-a100", tp=2, pp=2, dp=4, micro_batch=2, global_batch=64,
         sequence_parallel=True, tp_comm_overlap=True, zero=1, dp_overlap=True,
         overlap_param_gather=True),
    # FSDP2's memory layout and events, and simulate's memory headroom.
    dict(model="tiny-llama", cluster="dgx-h100", tp=2, pp=1, dp=4, micro_batch=1,
         global_batch=16, framework="fsdp", memory_headroom=0.1),
    # torchtitan's per-layer checkpointing: every second block of each rank recomputed.
    dict(model="tiny-llama", cluster="dgx-h100", tp=1, pp=2, dp=4, micro_batch=1,
         global_batch=16, framework="fsdp", recompute="full", recompute_every=2),
]


@pytest.mark.parametrize("kwargs", STRATEGIES)
def test_simulate_equals_cli(kwargs):
    kwargs = dict(kwargs, fallback="analytic")
    assert eventsim.simulate(**kwargs) == cli("simulate", kwargs)


def test_simulate_prints_nothing(capfd):
    eventsim.simulate(**STRATEGIES[0], fallback="analytic")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_search_equals_cli():
    kwargs = dict(model="gpt2-345m", cluster="dgx-a100", gpus=16, global_batch=64,
                  micro_batch=[1, 2], schedule="gpipe,dapple", recompute=["none", "full"],
                  fallback="analytic")
    result = eventsim.search(**kwargs)
    report = cli("search", kwargs)
    assert result.report == report
    assert [dict(c) for c in result] == report["candidates"]
    assert result[0].rank == 1 and result.best.strategy == report["best"]
    assert result.simulate_command == report["simulate_command"]


def test_search_top_equals_cli():
    kwargs = dict(model="gpt2-345m", cluster="dgx-a100", gpus=16, global_batch=64, top=3,
                  fallback="analytic")
    assert [dict(c) for c in eventsim.search(**kwargs)] == cli("search", kwargs)["candidates"]


@pytest.mark.parametrize("kwargs", [
    dict(model="no-such-model", cluster="dgx-a100", tp=1, pp=1, dp=1, global_batch=8),
    dict(model="gpt2-345m", cluster="dgx-a100", tp=3, pp=1, dp=1, global_batch=8),  # 16 heads
    dict(model="gpt2-345m", cluster="dgx-a100", tp=1, pp=1, dp=1, global_batch=8,
         schedule="nope"),
    dict(model="gpt2-345m", cluster="dgx-a100", tp="x", pp=1, dp=1, global_batch=8),
    dict(cluster="dgx-a100", tp=1, pp=1, dp=1, global_batch=8),  # --model is required
])
def test_bad_input_raises_value_error_with_cli_message(kwargs):
    kwargs = dict(kwargs, fallback="analytic")
    with pytest.raises(ValueError) as error:
        eventsim.simulate(**kwargs)
    result = cli("simulate", kwargs, check=False)
    assert result.returncode == 2
    assert result.stderr == f"eventsim: error: {error.value}\n"


def test_unknown_keyword_raises_type_error_naming_it():
    with pytest.raises(TypeError, match="no_such_flag"):
        eventsim.simulate(model="gpt2-345m", cluster="dgx-a100", no_such_flag=1)
    with pytest.raises(TypeError, match="help"):
        eventsim.search(help=True)
    with pytest.raises(TypeError, match="sequence_parallel"):  # a flag takes True or False
        eventsim.simulate(model="gpt2-345m", cluster="dgx-a100", sequence_parallel="on")


def test_false_and_none_leave_a_flag_out():
    base = dict(STRATEGIES[0], fallback="analytic")
    assert (eventsim.simulate(**base, sequence_parallel=False, profile=None)
            == eventsim.simulate(**base))


def test_docstring_lists_the_flags():
    assert "--global-batch" in eventsim.simulate.__doc__
    assert "--gpus" in eventsim.search.__doc__


def test_nul_and_lone_surrogate_raise_value_error_naming_the_keyword():
    # A NUL cut "gpt2-345m\0x" short to an existing model; a lone surrogate was "Unable to cast".
    with pytest.raises(ValueError, match=r"^simulate\(\): model: a NUL character at index 9 is"):
        eventsim.simulate(**dict(STRATEGIES[0], model="gpt2-345m\0x"), fallback="analytic")
    with pytest.raises(ValueError, match=r"^simulate\(\): model: not valid text"):
        eventsim.simulate(**dict(STRATEGIES[0], model="gpt\ud800"), fallback="analytic")
    with pytest.raises(ValueError, match=r"^simulate\(\): micro_batch: not valid text"):
        eventsim.simulate(**dict(STRATEGIES[0], micro_batch=["\udfff"]), fallback="analytic")


@pytest.mark.parametrize("flag", ["model", "cluster"])
def test_symlink_loop_and_long_name_raise_value_error_as_the_cli_says(flag, tmp_path):
    # Both were RuntimeError (the CLI's exit 3, "internal error"); now the CLI's one line.
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    for bad in (str(loop), "x" * 5000):
        kwargs = dict(STRATEGIES[0], fallback="analytic")
        kwargs[flag] = bad
        with pytest.raises(ValueError) as error:
            eventsim.simulate(**kwargs)
        result = cli("simulate", kwargs, check=False)
        assert result.returncode == 2
        assert result.stderr == f"eventsim: error: {error.value}\n"
        assert str(error.value).endswith(("Too many levels of symbolic links",
                                          "(5000 bytes)': File name too long"))


def test_ctrl_c_interrupts_a_long_call():
    # 100,000 sampled iterations of gpt2-345m 1M8P16D (2.85e9 op samples): 82 s of CPU on this
    # project's 2-core VM (bench/RESULTS.md). SIGINT after 0.5 s must raise KeyboardInterrupt well
    # before that (before: only when the call returned).
    import signal
    import threading
    import time
    kwargs = dict(model="gpt2-345m", cluster="dgx-a100", strategy="1M8P16D", micro_batch=1,
                  global_batch=512, fallback="analytic", jitter=0.05, iterations=100000)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        eventsim.simulate(**kwargs)
    elapsed = time.monotonic() - start
    timer.join()
    assert elapsed < 20, f"KeyboardInterrupt after {elapsed:.1f} s"
    # The module is usable afterwards: the cancellation was reset.
    assert eventsim.simulate(**STRATEGIES[0], fallback="analytic")["iteration_time_ms"] > 0


def test_fsdp_states_shard_over_d():
    """FSDP's weights + grads + optimizer are 16 bytes per parameter / D on every stage."""
    base = dict(model="tiny-llama", cluster="dgx-h100", tp=1, pp=1, micro_batch=1,
                global_batch=16, framework="fsdp", fallback="analytic")
    states = {}
    for d in (2, 4):
        memory = eventsim.simulate(dp=d, **base)["stages"][0]["memory"]
        states[d] = memory["weights_bytes"] + memory["gradients_bytes"] + memory["optimizer_bytes"]
    assert abs(states[2] - 2 * states[4]) <= 2


def test_overlap_flags_reach_the_report():
    """tp_comm_overlap / overlap_param_gather are Strategy fields the report carries and uses."""
    base = dict(model="gpt2-345m", cluster="dgx-a100", tp=2, pp=2, dp=4, micro_batch=2,
                global_batch=64, sequence_parallel=True, zero=1, dp_overlap=True,
                fallback="analytic")
    plain = eventsim.simulate(**base)
    both = eventsim.simulate(tp_comm_overlap=True, overlap_param_gather=True, **base)
    assert (both["tp_comm_overlap"], both["overlap_param_gather"]) == (True, True)
    assert (plain["tp_comm_overlap"], plain["overlap_param_gather"]) == (False, False)
    mean = both["devices"]["mean"]
    assert mean["exposed_tp_comm_ms"] < mean["tp_comm_ms"]


def test_cp_comm_type_reaches_the_report():
    """cp_comm_type is a Strategy field: the report names it and the all-gather's transfers, which
    nothing overlaps, are all exposed (ops/cp_comm.h)."""
    base = dict(model="tiny-llama", cluster="dgx-h100", tp=1, pp=1, dp=1, cp=4, micro_batch=1,
                global_batch=1, fallback="analytic")
    ring = eventsim.simulate(**base)
    gathered = eventsim.simulate(cp_comm_type="allgather", **base)
    assert (ring["cp_comm_type"], gathered["cp_comm_type"]) == ("p2p", "allgather")
    mean = gathered["devices"]["mean"]
    assert mean["exposed_cp_comm_ms"] == pytest.approx(mean["cp_comm_ms"])
    with pytest.raises(ValueError, match="per layer"):
        eventsim.simulate(cp_comm_type=["p2p", "a2a"], **base)


def test_version_matches_the_cli():
    """`eventsim.__version__` is the version `eventsim --version` prints (CMake's project())."""
    result = subprocess.run([CLI, "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"eventsim {eventsim.__version__}"
    with open(os.path.join(os.path.dirname(__file__), "..", "CMakeLists.txt")) as cmake:
        declared = next(line for line in cmake if line.startswith("project("))
    assert f"VERSION {eventsim.__version__})" in declared


def test_typed_simulate_fields_are_the_report():
    kwargs = dict(STRATEGIES[0], fallback="analytic")
    result = eventsim.simulate(**kwargs)
    report = cli("simulate", kwargs)
    assert isinstance(result, eventsim.SimulateResult)
    assert result.iteration_time_ms == report["iteration_time_ms"] > 0
    assert result.mfu == report["mfu"] and result.strategy == report["strategy"] == "2M2P4D"
    assert result.peak_memory_bytes == report["peak_memory_bytes"]


def test_events_equals_cli():
    kwargs = dict(model="tiny-gpt", cluster="cpu-local", strategy="2M2P1D", micro_batch=2,
                  global_batch=8)
    result = eventsim.events(**kwargs)
    report = cli("events", kwargs)
    assert result == report
    assert result.unique_events == len(result.events) == len(report["events"])
    # A 2M2P1D plan has tensor-parallel all-reduces and pipeline sends among its events.
    kinds = {e.kind for e in result.events}
    assert {"compute", "p2p"} <= kinds
    assert sum(e.count for e in result.events) <= result.op_executions


def test_collective_equals_cli():
    kwargs = dict(cluster="dgx-a100", op="all-reduce", gpus=8, bytes=["1M", "32M"])
    result = eventsim.collective(**kwargs)
    report = cli("collective", kwargs)
    assert result == report
    assert [p.bytes for p in result.points] == [1 << 20, 32 << 20]
    # busbw = algbw x 2(n-1)/n for an all-reduce of n = 8 ranks; algbw = bytes / time.
    for p in result.points:
        assert p.algbw_gb_s == pytest.approx(p.bytes / p.time_us / 1e3)
        assert p.busbw_gb_s == pytest.approx(p.algbw_gb_s * 2 * 7 / 8)


def test_list_names_the_bundled_files():
    models = eventsim.list("models")
    names = [m.name for m in models]
    folder = os.path.join(eventsim.config_dir(), "models")
    assert sorted(names) == sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
    assert all(m.kind == "models" and os.path.isfile(m.path) for m in models)
    kinds = {e.kind for e in eventsim.list()}
    assert kinds == {"models", "clusters", "devices"}
    with pytest.raises(ValueError):
        eventsim.list("gpus")


def test_calibrate_writes_the_device_file(tmp_path):
    # An intra-node all-reduce curve over 8 ranks, made up: 10 us + bytes / 100 GB/s.
    csv = tmp_path / "ar.csv"
    rows = ["size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)"]
    for size in [1 << k for k in range(20, 27)]:
        time_ns = 10e3 + size / 100.0
        busbw = size / time_ns * 1.75
        rows.append(f"{size},{size // 4},float,{time_ns:.0f},{busbw:.2f},{time_ns:.0f},{busbw:.2f}")
    csv.write_text("\n".join(rows) + "\n")
    prof = tmp_path / "coll.yaml"
    subprocess.run([CLI, "import-nccl-tests", str(csv), "--group", "8", "-o", str(prof)],
                   check=True, capture_output=True)
    out = tmp_path / "dev.yaml"
    result = eventsim.calibrate(cluster="dgx-a100", collectives=str(prof), output=str(out))
    assert isinstance(result, eventsim.CalibrationResult)
    assert result.device_file == str(out) and out.is_file()
    assert result.device == "a100-sxm4-80gb" and result.predictions_file is None


def test_version_function():
    assert eventsim.version() == eventsim.__version__


def test_grad_reduce_in_bf16_halves_the_gradient_buffer_and_its_reduction():
    """--grad-reduce-in-bf16: Megatron's bf16 gradients held and reduced in 2 bytes, not fp32's 4."""
    base = dict(model="llama3-8b", cluster="dgx-h100", tp=8, pp=1, dp=2, micro_batch=1,
                global_batch=4, fallback="analytic")
    fp32 = eventsim.simulate(**base)
    bf16 = eventsim.simulate(grad_reduce_in_bf16=True, **base)
    assert (fp32["grad_reduce_in_bf16"], bf16["grad_reduce_in_bf16"]) == (False, True)
    grads = [r["stages"][0]["memory"]["gradients_bytes"] for r in (fp32, bf16)]
    assert grads[0] == 2 * grads[1]
    assert bf16["devices"]["mean"]["dp_comm_ms"] < fp32["devices"]["mean"]["dp_comm_ms"]
    with pytest.raises(ValueError, match="grad-reduce-in-bf16"):
        eventsim.simulate(grad_reduce_in_bf16=True, framework="fsdp", **base)


def test_optimizer_impl_foreach_costs_more_memory_passes_than_fused():
    """--optimizer-impl: torchtitan's fused AdamW (7 fp32 elements a parameter) against its eight
    foreach kernels (20); Megatron takes only its fused Adam, for-loop is refused."""
    base = dict(model="llama3-8b", cluster="dgx-h100", tp=1, pp=1, dp=8, micro_batch=1,
                global_batch=8, framework="fsdp", fallback="analytic")
    fused = eventsim.simulate(**base)
    foreach = eventsim.simulate(optimizer_impl="foreach", **base)
    assert (fused["optimizer_impl"], foreach["optimizer_impl"]) == ("fused", "foreach")
    assert foreach["iteration_time_ms"] > fused["iteration_time_ms"]
    with pytest.raises(ValueError, match="optimizer-impl"):
        eventsim.simulate(optimizer_impl="foreach", **dict(base, framework="megatron"))
    with pytest.raises(ValueError, match="for-loop"):
        eventsim.simulate(optimizer_impl="for-loop", **base)


def test_fsdp_wrap_root_gathers_less_than_separate_groups():
    """--fsdp-wrap: torchtitan's separate embedding and [norm, output] groups (the default) gather
    the embedding and the last block again for the backward; 9dec370's root group gathers the
    embedding and the output once and keeps the last block. Megatron refuses the flag."""
    base = dict(model="llama3-8b", cluster="dgx-h100", tp=1, pp=1, dp=8, micro_batch=1,
                global_batch=8, framework="fsdp", fallback="analytic")
    separate = eventsim.simulate(**base)
    root = eventsim.simulate(fsdp_wrap="root", **base)
    assert (separate["fsdp_wrap"], root["fsdp_wrap"]) == ("separate", "root")
    assert root["devices"]["mean"]["dp_comm_ms"] < separate["devices"]["mean"]["dp_comm_ms"]
    with pytest.raises(ValueError, match="fsdp-wrap"):
        eventsim.simulate(fsdp_wrap="root", **dict(base, framework="megatron"))
