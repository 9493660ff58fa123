"""The diagnosis as a pure function: recorded real captures, hand-made samples, the parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pygdbmi import gdbmiparser

from workbench.debugging.bridge import bridge_names
from workbench.debugging.cpp_names import display_name, flatten_template, strip_signature
from workbench.debugging.diagnosis.cycles import find_cycle
from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.gdb import mi
from workbench.debugging.model import (
    Capture,
    Frame,
    Sample,
    ThreadActivity,
    ThreadStack,
    WaitInfo,
    capture_from_json,
)

RECORDED = Path(__file__).resolve().parent.parent / "recorded"


def recorded(name: str) -> Capture:
    return capture_from_json(json.loads((RECORDED / f"{name}.json").read_text()))


# --- recorded captures of the fixture programs (tests/debugging/record_samples.py) ---------


def test_recorded_bridge_loop_at_o2() -> None:
    diagnosis = diagnose(recorded("bridge_o2"))
    assert diagnosis.kind == "call-cycle" and diagnosis.primary.pattern == "tail-calls"
    assert diagnosis.primary.bridge is not None
    assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"
    assert diagnosis.proposed_patch is not None


def test_the_binarys_read_is_evidence_for_a_thread_that_never_saw_the_stub_call() -> None:
    # CI, 8 threads on 2 cores: the first thread's counters caught the host method's jump
    # but never Provider_GetHost, so it named the pair without having seen the stub call;
    # the jump read from the binary (by another thread's counters) was left out of the
    # verdict's evidence. The recorded capture, cut to that: one stack sample, no stepping,
    # the binary read, and the first thread's Provider_GetHost hit turned into the jump.
    document = json.loads((RECORDED / "bridge_o2_threads.json").read_text())
    document["samples"] = document["samples"][:1]
    for thread in document["samples"][0]["threads"]:
        thread.pop("trail", None)
    document["bridge_code"] = {
        "onnxruntime::DataTypeImpl::GetType<float>": {
            "host_method": "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float",
            "instruction": "jmp 0x556e20b38340 <onnxruntime::DataTypeImpl::GetType<float>>",
        }
    }
    first = document["samples"][0]["threads"][1]
    assert first["frames"][0]["function"] == "onnxruntime::DataTypeImpl::GetType<float>"
    hits = document["pc_samples"][str(first["tid"])]
    stub_sp = hits[0]["sp"]
    for hit in hits:
        if hit["function"] == "onnxruntime::Provider_GetHost":
            hit["function"] = "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float"
            hit["sp"] = stub_sp
    diagnosis = diagnose(capture_from_json(document))
    assert diagnosis.primary.threads[0] == first["tid"]
    assert diagnosis.primary.bridge is not None
    assert any(
        "is `jmp 0x556e20b38340" in line and "(read with gdb, not stepped)" in line
        for line in diagnosis.primary.evidence
    ), diagnosis.primary.evidence


def test_a_thread_caught_only_in_the_stub_is_in_the_loop_the_binary_confirmed() -> None:
    # A loaded 2-core host (a fresh-clone suite beside CPU hogs): every program-counter read
    # of the looping thread fell on the same instruction of the stub with the same registers
    # (it ran between the reads, but was caught there each time), never in Provider_GetHost
    # or the host method; the verdict said "spins in DataTypeImpl::GetType<float>", though
    # the binary's read (bridge_code: the host method jumps straight back to that stub) and
    # the stack say which loop it is. The recorded capture, cut to that.
    document = json.loads((RECORDED / "bridge_o2_threads.json").read_text())
    document["samples"] = document["samples"][:1]
    sample = document["samples"][0]
    # (no stack caught in Provider_GetHost either)
    sample["threads"] = [
        thread
        for thread in sample["threads"]
        if not any(frame["function"].endswith("Provider_GetHost") for frame in thread["frames"])
    ]
    kept = {str(thread["tid"]) for thread in sample["threads"]}
    document["pc_samples"] = {
        tid: hits for tid, hits in document["pc_samples"].items() if tid in kept
    }
    for thread in sample["threads"]:
        thread.pop("trail", None)
    document["bridge_code"] = {
        "onnxruntime::DataTypeImpl::GetType<float>": {
            "host_method": "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float",
            "instruction": "jmp 0x556e20b38340 <onnxruntime::DataTypeImpl::GetType<float>>",
        }
    }
    for hits in document["pc_samples"].values():
        stub = next(h for h in hits if h["function"].endswith("GetType<float>"))
        for hit in hits:
            hit.update(address=stub["address"], sp=stub["sp"], state=stub["state"])
            hit["function"] = stub["function"]
    diagnosis = diagnose(capture_from_json(document))
    assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
    assert diagnosis.primary.bridge is not None
    assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"


def test_recorded_bridge_recursion_at_o0() -> None:
    diagnosis = diagnose(recorded("bridge_o0"))
    assert diagnosis.kind == "call-cycle" and diagnosis.primary.pattern == "recursion"
    assert diagnosis.hung is True


def test_recorded_static_init_deadlock() -> None:
    diagnosis = diagnose(recorded("static_init_deadlock"))
    assert diagnosis.kind == "static-init" and diagnosis.hung is True
    assert "waits in pthread_join" in diagnosis.summary


def test_recorded_lock_order_deadlock() -> None:
    diagnosis = diagnose(recorded("lock_order"))
    assert diagnosis.kind == "deadlock" and len(diagnosis.primary.threads) == 2


def test_recorded_busy_program_is_not_hung() -> None:
    diagnosis = diagnose(recorded("busy"))
    assert diagnosis.kind == "busy" and diagnosis.hung is False


def test_recorded_idle_threads_are_waiting_not_hung() -> None:
    diagnosis = diagnose(recorded("many_threads"))
    assert diagnosis.kind == "waiting" and diagnosis.hung is None


@pytest.mark.parametrize("name", sorted(path.stem for path in RECORDED.glob("*.json")))
def test_recorded_captures_round_trip_through_json(name: str) -> None:
    document = json.loads((RECORDED / f"{name}.json").read_text())
    again = capture_from_json(document).to_json()
    for key in ("pid", "samples", "complete", "notes"):
        assert again[key] == document[key]
    # cpu_share is derived from the rounded figures, so it may differ in the last digit.
    strip = [{k: v for k, v in entry.items() if k != "cpu_share"} for entry in again["activity"]]
    assert strip == [{k: v for k, v in e.items() if k != "cpu_share"} for e in document["activity"]]


# --- hand-made samples ----------------------------------------------------------------------


def _stack(*functions: str, gdb_id: int = 1, tid: int = 100, **extra) -> ThreadStack:
    frames = tuple(
        Frame(level=i, address=0x1000 + i, function=name, library="/bin/prog")
        for i, name in enumerate(functions)
    )
    return ThreadStack(
        gdb_id=gdb_id, tid=tid, name="prog", state="R", wchan=None, frames=frames, **extra
    )


def _capture(*samples: list[ThreadStack], running: dict[int, bool] | None = None) -> Capture:
    capture = Capture(
        pid=100,
        command=["prog"],
        executable="/bin/prog",
        requested_samples=len(samples),
        interval=0.1,
    )
    capture.samples = [
        Sample(index=i, at=i * 0.1, duration=0.01, threads=tuple(threads))
        for i, threads in enumerate(samples)
    ]
    for tid, is_running in (running or {}).items():
        capture.activity[tid] = ThreadActivity(
            tid=tid,
            observations=10,
            states={"R": 10} if is_running else {"S": 10},
            cpu_seconds=0.9 if is_running else 0.0,
            seconds=1.0,
        )
    return capture


def test_generic_tail_call_cycle_needs_a_same_level_trail() -> None:
    def sample(top: str) -> list[ThreadStack]:
        return [
            _stack(top, "main", trail=("ping", "pong", "ping", "pong"), trail_top=("ping", "pong"))
        ]

    diagnosis = diagnose(
        _capture(sample("ping"), sample("pong"), sample("ping"), running={100: True})
    )
    assert diagnosis.kind == "call-cycle" and diagnosis.primary.pattern == "tail-calls"
    assert diagnosis.primary.bridge is None
    assert set(diagnosis.primary.functions) == {"ping", "pong"}


def test_a_loop_calling_a_helper_is_not_a_tail_call_cycle() -> None:
    # loop_fn calls helper: the helper runs deeper, so only loop_fn is at the top level.
    def sample(*frames: str) -> list[ThreadStack]:
        return [
            _stack(
                *frames, trail=("loop_fn", "helper", "loop_fn", "helper"), trail_top=("loop_fn",)
            )
        ]

    diagnosis = diagnose(
        _capture(
            sample("helper", "loop_fn", "main"),
            sample("loop_fn", "main"),
            sample("helper", "loop_fn", "main"),
            running={100: True},
        )
    )
    assert diagnosis.kind == "busy" and diagnosis.hung is False


def test_bridge_stub_seen_alone_is_recognised_through_provider_gethost() -> None:
    stub = "onnxruntime::DataTypeImpl::GetType<onnxruntime::Tensor>"
    samples = [
        [_stack(stub, "_GLOBAL__sub_I_cuda_kernels.cc", "call_init", "_start")],
        [
            _stack(
                "onnxruntime::Provider_GetHost",
                stub,
                "_GLOBAL__sub_I_cuda_kernels.cc",
                "call_init",
                "_start",
            )
        ],
    ]
    diagnosis = diagnose(_capture(*samples, running={100: True}))
    assert diagnosis.kind == "call-cycle"
    bridge = diagnosis.primary.bridge
    assert bridge is not None
    assert bridge.host_method == "ProviderHostImpl::DataTypeImpl__GetType_Tensor"
    assert any("static initialisation before main" in item for item in diagnosis.primary.evidence)
    assert any(finding.kind == "static-init" for finding in diagnosis.findings)


def test_bridge_loop_through_g_host_found_from_the_stepping_trail() -> None:
    stub = "onnxruntime::TensorShape::SizeHelper"
    host = "onnxruntime::ProviderHostImpl::TensorShape__SizeHelper"
    trail = (stub, host, stub, host, stub)

    def sample() -> list[ThreadStack]:
        return [
            _stack(stub, "onnxruntime::Initialize", "main", trail=trail, trail_top=(stub, host))
        ]

    diagnosis = diagnose(_capture(sample(), sample(), running={100: True}))
    assert diagnosis.kind == "call-cycle" and diagnosis.primary.pattern == "tail-calls"
    assert diagnosis.summary.startswith(
        "ProviderHostImpl::TensorShape__SizeHelper calls TensorShape::SizeHelper which calls "
        "back through g_host:"
    )
    assert diagnosis.proposed_patch is not None


def test_self_deadlock_on_a_mutex_held_by_the_same_thread() -> None:
    thread = _stack(
        "__lll_lock_wait",
        "pthread_mutex_lock",
        "reload_config",
        "main",
        wait=WaitInfo(kind="mutex", address=0x5000, owner_tid=100, symbol="config_mutex"),
    )
    diagnosis = diagnose(_capture([thread], [thread], running={100: False}))
    assert diagnosis.kind == "deadlock" and diagnosis.hung is True
    assert diagnosis.summary.startswith("self-deadlock")
    assert "config_mutex" in diagnosis.summary


def test_lock_wait_without_cycle_is_not_called_a_deadlock() -> None:
    waiter = _stack(
        "__lll_lock_wait",
        "pthread_mutex_lock",
        "flush",
        "main",
        tid=100,
        wait=WaitInfo(kind="mutex", address=0x5000, owner_tid=101, symbol="log_mutex"),
    )
    holder = _stack("write", "flush_to_disk", "worker", gdb_id=2, tid=101)
    diagnosis = diagnose(
        _capture([waiter, holder], [waiter, holder], running={100: False, 101: False})
    )
    assert diagnosis.kind == "lock-wait" and diagnosis.hung is None
    assert "log_mutex" in diagnosis.summary and "LWP 101" in diagnosis.summary


def test_spinning_in_one_function_cannot_be_judged() -> None:
    thread = _stack("compute", "main")
    diagnosis = diagnose(_capture([thread], [thread], [thread], running={100: True}))
    assert diagnosis.kind == "spin" and diagnosis.hung is None


def test_single_sample_says_progress_cannot_be_judged() -> None:
    diagnosis = diagnose(_capture([_stack("compute", "main")], running={100: True}))
    assert any("only one sample" in item for item in diagnosis.primary.evidence)


def test_no_samples_means_exited() -> None:
    empty = _capture()
    assert diagnose(empty).kind == "exited"


# --- cycles, names, the bridge's naming --------------------------------------------------------


def test_find_cycle_prefers_the_shortest_period_covering_the_stack() -> None:
    stack = ["top", *(["a", "b"] * 20), "main"]
    cycle = find_cycle(stack)
    assert cycle is not None
    assert (cycle.period, cycle.start) == (2, 1)
    assert cycle.repeats == 20
    assert find_cycle(["a", "b", "c", "main"]) is None
    assert find_cycle(["f"] * 30).period == 1


@settings(deadline=None)
@given(
    prefix=st.lists(st.sampled_from(["x", "y", "z"]), max_size=5),
    block=st.lists(st.sampled_from(["f", "g", "h", "k"]), min_size=1, max_size=4, unique=True),
    repeats=st.integers(min_value=8, max_value=30),
)
def test_find_cycle_finds_any_repeated_block(prefix, block, repeats) -> None:
    cycle = find_cycle([*prefix, *(block * repeats), "main"])
    assert cycle is not None
    assert set(cycle.functions) == set(block)
    assert cycle.repeats >= repeats - 1


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("onnxruntime::DataTypeImpl::GetType<float>", "onnxruntime::DataTypeImpl::GetType<float>"),
        (
            "onnxruntime::DataTypeImplBase const* onnxruntime::DataTypeImpl::GetType<float>()",
            "onnxruntime::DataTypeImpl::GetType<float>",
        ),
        ("std::thread::join()", "std::thread::join"),
        ("Foo::bar(int, char const*) const", "Foo::bar"),
        ("(anonymous namespace)::worker(void*)", "(anonymous namespace)::worker"),
        ("Foo::operator()(int)", "Foo::operator()"),
        ("compute [clone .constprop.0]", "compute"),
        ("main", "main"),
    ],
)
def test_strip_signature(raw: str, clean: str) -> None:
    assert strip_signature(raw) == clean


def test_template_flattening_and_display() -> None:
    assert flatten_template("GetType<float>") == "GetType_float"
    assert flatten_template("GetType<std::string>") == "GetType_string"
    assert flatten_template("GetTensorType<onnxruntime::MLFloat16>") == "GetTensorType_MLFloat16"
    iterator = "__gnu_cxx::__normal_iterator<unsigned int*, std::vector<unsigned int> >"
    assert display_name(f"std::__introsort_loop<{iterator}, long>") == "std::__introsort_loop<…>"


def test_bridge_pair_matching() -> None:
    host = "onnxruntime::ProviderHostImpl::TensorShape__SizeHelper"
    assert bridge_names.host_method_parts(host) == ("TensorShape", "SizeHelper")
    assert bridge_names.counterpart_matches(host, "onnxruntime::TensorShape::SizeHelper")
    assert not bridge_names.counterpart_matches(host, "onnxruntime::TensorShape::Size")
    pair = bridge_names.find_pair([host, "onnxruntime::TensorShape::SizeHelper"], set())
    assert pair is not None and pair.counterpart == "TensorShape::SizeHelper"
    assert bridge_names.find_pair(["main", "compute"], set()) is None


# --- the MI parser agrees with pygdbmi's --------------------------------------------------------

_MI_STRINGS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)


def _c_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return f'"{escaped}"'


_VALUES = st.recursive(
    _MI_STRINGS.map(_c_string),
    lambda inner: st.one_of(
        st.lists(st.tuples(st.sampled_from(["a", "frame", "addr", "func"]), inner), max_size=3).map(
            lambda items: "{" + ",".join(f"{k}={v}" for k, v in dict(items).items()) + "}"
        ),
        st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
    ),
    max_leaves=8,
)


# Generating nested MI values is slow on a loaded machine: neither the health check's time
# limit nor a per-example deadline says anything about the parser.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    token=st.one_of(st.none(), st.integers(min_value=0, max_value=99999)),
    sigil=st.sampled_from(["^", "*", "="]),
    results=st.dictionaries(
        st.sampled_from(["msg", "stack", "threads", "value", "id"]), _VALUES, max_size=3
    ),
)
def test_mi_parser_matches_pygdbmi(token, sigil, results) -> None:
    message = {"^": "done", "*": "stopped", "=": "thread-created"}[sigil]
    line = f"{'' if token is None or sigil != '^' else token}{sigil}{message}"
    if results:
        line += "," + ",".join(f"{key}={value}" for key, value in results.items())
    ours = mi.parse_line(line)
    theirs = gdbmiparser.parse_response(line)
    theirs.setdefault("token", None)
    assert ours == theirs


def test_mi_parser_reads_stream_records_and_real_frames() -> None:
    line = '~"0x000055c14be93189 in GetType<float> () at a.cc:4\\n"'
    assert mi.parse_line(line) == gdbmiparser.parse_response(line) | {"token": None}
    stack = (
        '7^done,stack=[frame={level="0",addr="0x1",func="f",file="a.cc",line="4",arch="i386:x86-64"},'
        'frame={level="1",addr="0x2",func="main"}]'
    )
    parsed = mi.parse_line(stack)
    assert parsed["token"] == 7 and [f["func"] for f in parsed["payload"]["stack"]] == ["f", "main"]


def test_more_samples_are_advised_only_while_they_could_tell() -> None:
    """Issue 29: with --samples 5 `bt` still advised "More samples (--samples 5)". The recorded
    spin (3 samples) is taken again as 5: the same stacks, two samples more."""
    three = recorded("spin_mixed")
    said = " | ".join(finding.summary for finding in diagnose(three).findings)
    assert "More samples (--samples 5)" in said
    five = Capture(**{**vars(three), "samples": [*three.samples, *three.samples[1:3]]})
    said = " | ".join(finding.summary for finding in diagnose(five).findings)
    assert "More samples" not in said
    assert "All 5 samples saw it there: more would not tell" in said


def _with_io(capture: Capture, tid: int, **io: int) -> Capture:
    counters = {"rchar": 0, "wchar": 0, "syscr": 0, "syscw": 0, **io}
    capture.activity[tid].io = counters
    capture.activity[tid].io_seconds = 1.0
    return capture


def test_a_thread_whose_output_advances_is_busy_making_progress() -> None:
    """Issue 29: a program computing and printing as it goes was "spinning — cannot tell"."""
    thread = _stack("compute", "main")
    capture = _capture([thread], [thread], [thread], running={100: True})
    diagnosis = diagnose(_with_io(capture, 100, wchar=240, syscw=10))
    assert diagnosis.kind == "busy" and diagnosis.hung is False, diagnosis.summary
    assert diagnosis.summary.startswith("busy, making progress")
    assert any("wrote 240 bytes in 10 write calls" in line for line in diagnosis.primary.evidence)
    # The same thread writing nothing stays undecided.
    silent = diagnose(_with_io(_capture([thread], [thread], [thread], running={100: True}), 100))
    assert silent.kind == "spin" and silent.hung is None


def test_threads_yielding_without_output_are_a_livelock_named_by_thread() -> None:
    first = _stack("sched_yield", "worker", "start_thread", gdb_id=2, tid=101)
    second = _stack("pthread_mutex_trylock", "worker", "start_thread", gdb_id=3, tid=102)
    capture = _capture([first, second], [first, second], running={101: True, 102: True})
    diagnosis = diagnose(_with_io(_with_io(capture, 101), 102))
    assert diagnosis.kind == "livelock" and diagnosis.hung is True, diagnosis.summary
    assert diagnosis.primary.threads == [101, 102]
    assert diagnosis.summary.startswith("livelock: threads 2, 3 ")
    # One of them writing: it gets through, no livelock.
    capture = _capture([first, second], [first, second], running={101: True, 102: True})
    assert diagnose(_with_io(_with_io(capture, 101, wchar=5, syscw=1), 102)).kind != "livelock"


def test_pool_workers_yielding_beside_a_computing_thread_are_not_a_livelock() -> None:
    """Workers that spin with sched_yield while another thread computes wait for work."""
    first = _stack("sched_yield", "worker", "start_thread", gdb_id=2, tid=101)
    second = _stack("sched_yield", "worker", "start_thread", gdb_id=3, tid=102)
    computing = [_stack(top, "main", gdb_id=1, tid=100) for top in ("sort", "merge")]
    capture = _capture(
        [computing[0], first, second],
        [computing[1], first, second],
        running={100: True, 101: True, 102: True},
    )
    capture = _with_io(_with_io(_with_io(capture, 100), 101), 102)
    assert diagnose(capture).kind != "livelock"
    # Without the computing thread (blocked in join), the same two workers are a livelock.
    joining = _stack("pthread_join", "main", gdb_id=1, tid=100)
    capture = _capture(
        [joining, first, second], [joining, first, second], running={101: True, 102: True}
    )
    capture.activity[100] = ThreadActivity(tid=100, observations=10, states={"S": 10})
    capture = _with_io(_with_io(_with_io(capture, 100), 101), 102)
    assert diagnose(capture).kind == "livelock"
