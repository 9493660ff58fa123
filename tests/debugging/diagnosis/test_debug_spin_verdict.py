"""A single spinning thread judged from program counters alone (`bt --no-step`), real programs.

Before, one thread in a tight loop was "spinning — cannot tell" whatever the loop did. Now
the sampler keeps, with each program counter, a digest of all the thread's registers and the
CPU time it had run: a loop caught again and again at the same instructions, having run in
between, with the same registers each time, changed nothing and is hung; a loop whose
registers change computes, and stays undecided; a busy program is never called hung.
"""

from __future__ import annotations

import json

from workbench.cli.main import main


def _bt(pid: int, capsys, *options: str) -> dict:
    assert main(["bt", str(pid), "--json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_spin_on_a_flag_is_hung_from_program_counters_alone(start, capsys) -> None:
    program = start("spin", "flag", settle=0.2)
    for _ in range(3):
        document = _bt(program.pid, capsys, "--no-step")
        diagnosis = document["diagnosis"]
        assert not any(thread["trail"] for thread in document["samples"][0]["threads"])
        assert diagnosis["kind"] == "spin" and diagnosis["hung"] is True, diagnosis["summary"]
        assert "wait_for_release" in diagnosis["summary"]
        evidence = " ".join(diagnosis["evidence"])
        # The verdict names what it rests on: the reads, the CPU time run between them, the
        # few addresses, the registers unchanged at each.
        assert "every register was the same every time" in evidence
        assert "ms on a CPU" in evidence and "the stack pointer never moving" in evidence
        hits = document["pc_samples"][str(program.pid)]
        assert len({hit["address"] for hit in hits}) <= 3
        assert all(hit["state"] and hit["ran_ns"] for hit in hits)
        assert document["diagnosis"]["thread_verdicts"][str(program.pid)] == {
            "kind": "spin",
            "hung": True,
        }


def test_a_counting_loop_is_not_called_hung(start, capsys) -> None:
    # The same shape (one function, a few instructions, the stack still), but its registers
    # change: a long computation, which program counters cannot tell from an endless loop.
    program = start("spin", "count", settle=0.2)
    for _ in range(3):
        diagnosis = _bt(program.pid, capsys, "--no-step")["diagnosis"]
        assert diagnosis["kind"] == "spin" and diagnosis["hung"] is None, diagnosis["summary"]
        assert "registers change as it goes" in diagnosis["summary"]
        assert any("its registers differed" in item for item in diagnosis["evidence"])


def test_one_thread_in_the_bridge_loop_gets_a_verdict_without_stepping(start, capsys) -> None:
    # One thread: its samples may never leave the stub (the host method is a single jump),
    # so the loop's two functions are not always seen; the registers still show no progress.
    program = start("bridge_o2", settle=0.3)
    for _ in range(3):
        diagnosis = _bt(program.pid, capsys, "--no-step")["diagnosis"]
        assert diagnosis["kind"] in ("call-cycle", "spin"), diagnosis["summary"]
        assert diagnosis["hung"] is True, diagnosis["summary"]


def test_a_busy_program_is_never_called_hung(start, capsys) -> None:
    # On a machine busier than the program's four threads can use, a thread is often not
    # scheduled between two rounds: those reads are one moment twice (same registers) and
    # must not count as a loop that stood still.
    program = start("busy", settle=0.3)
    for _ in range(4):
        document = _bt(program.pid, capsys, "--no-step")
        assert all(finding["hung"] is not True for finding in document["diagnosis"]["findings"]), [
            finding["summary"] for finding in document["diagnosis"]["findings"]
        ]


def test_a_thread_the_kernel_works_for_at_one_place_is_not_called_hung(
    start, capsys, tmp_path
) -> None:
    # Its CPU time is the kernel's, spent for it at one place in its code: reading a file
    # (the file position moves on in the kernel, not in a register) or mapping pages (each
    # one a page fault the kernel handles). Each stop comes where the same system call ends,
    # with the same registers, after milliseconds of CPU time: it used to be "spins in
    # read_again without progress", HUNG, every time.
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)) * (16 << 12))  # 16 MiB
    for mode, function in (("read", "read_again"), ("populate", "populate_again")):
        program = start("kernel_work", mode, str(data), settle=0.2)
        for _ in range(2):
            document = _bt(program.pid, capsys, "--no-step")
            findings = document["diagnosis"]["findings"]
            assert all(finding["hung"] is not True for finding in findings), [
                finding["summary"] for finding in findings
            ]
            assert any(function in finding["summary"] for finding in findings), findings
            hits = document["pc_samples"][str(program.pid)]
            # What the verdict rests on is in the record: the stops at a system call's end,
            # the page faults counted (64 MiB mapped is 16,384 of them each time).
            assert any(hit["in_syscall"] for hit in hits), hits
            if mode == "populate":
                assert hits[-1]["faults"] - hits[0]["faults"] >= 16384, hits
        program.process.kill()


def test_an_inlined_atomic_load_is_not_a_call_cycle(start, capsys) -> None:
    # Stepping the spin goes "wait_for_release → __atomic_base<bool>::load → …": gdb names the
    # inlined load as a function of its own. Its program counters never leave one function,
    # so it is a spin, not "a call cycle made of tail calls".
    program = start("spin", "flag", settle=0.2)
    for _ in range(2):
        document = _bt(program.pid, capsys)
        assert any(thread["trail"] for thread in document["samples"][0]["threads"])
        diagnosis = document["diagnosis"]
        assert diagnosis["kind"] == "spin" and diagnosis["hung"] is True, diagnosis["summary"]


def test_an_interpreter_loop_with_inlined_helpers_is_not_a_call_cycle(start, capsys) -> None:
    # Stepping goes evaluate_frame → decode → dispatch → add_object → evaluate_frame …, and
    # decode and dispatch run at evaluate_frame's stack level: they are inlined into it (one
    # ELF symbol), so this is one function looping and calling add_object, which computes as
    # it goes. It used to be "a call cycle made of tail calls", HUNG.
    program = start("interpreter_loop", settle=0.2)
    for _ in range(3):
        document = _bt(program.pid, capsys)
        trails = [thread["trail"] for thread in document["samples"][0]["threads"]]
        assert any({"decode", "evaluate_frame"} <= set(trail) for trail in trails), trails
        diagnosis = document["diagnosis"]
        assert diagnosis["kind"] == "spin" and diagnosis["hung"] is None, diagnosis["summary"]
        assert "tail call" not in diagnosis["summary"]
