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
    # FSDP2's memory layout and events, and simulate's memory headroom.
    dict(model="tiny-llama", cluster="dgx-h100", tp=2, pp=1, dp=4, micro_batch=1,
         global_batch=16, framework="fsdp", memory_headroom=0.1),
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
    candidates = eventsim.search(**kwargs)
    assert candidates == cli("search", kwargs)["candidates"]
    assert candidates[0]["rank"] == 1


def test_search_top_equals_cli():
    kwargs = dict(model="gpt2-345m", cluster="dgx-a100", gpus=16, global_batch=64, top=3,
                  fallback="analytic")
    assert eventsim.search(**kwargs) == cli("search", kwargs)["candidates"]


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
