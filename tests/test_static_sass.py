"""scripts/static_sass.py's readings of compiled code, on hand-made instruction lists: which branches make a key
loop, where the softmax sits against the wait for P V, and which waits on memory are new round trips."""
from __future__ import annotations

import importlib.util

from conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("static_sass", ROOT / "scripts" / "static_sass.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _script()


def _insts(*ops):
    """(address, predicate, opcode, operands), 16 bytes apart from 0x100; an op is 'OPCODE' or 'OPCODE args'."""
    out = []
    for i, op in enumerate(ops):
        code, _, args = op.partition(" ")
        out.append((0x100 + 16 * i, "", code, args))
    return out


def test_a_sass_line_reads_as_address_predicate_opcode_and_operands():
    line = "        /*3870*/  @!P0  HGMMA.64x128x16.F32.BF16 R88, gdesc[UR8].tnspB, R88 ;"
    m = S.LINE.search(line)
    assert (int(m.group(1), 16), m.group(2).strip(), m.group(3)) == (0x3870, "@!P0", "HGMMA.64x128x16.F32.BF16")


def test_the_key_loop_is_the_inner_backward_branch_around_hgmma_not_a_waits_out_of_line_retry():
    insts = _insts(
        "MOV",                      # 0x100: the walk over query tiles starts
        "HGMMA",                    # 0x110: the key loop's top
        "SYNCS.PHASECHK",           # 0x120
        "BRA 0x200",                # 0x130: an mbarrier wait's retry, out of line
        "MUFU.EX2",                 # 0x140
        "BRA 0x110",                # 0x150: the key loop's back edge
        "BRA 0x100",                # 0x160: the walk's back edge, around the key loop
        "EXIT",                     # 0x170
        "NOP", "NOP", "NOP", "NOP", "NOP", "NOP", "NOP", "NOP",
        "SYNCS.PHASECHK",           # 0x200: the retry
        "BRA 0x140",                # 0x210: back to just after the branch that left: no loop
    )
    assert S.loops(insts) == [(0x110, 0x150)]


def test_the_landmarks_count_the_softmax_that_runs_before_the_wait_for_every_wgmma():
    body = _insts("HGMMA", "HGMMA", "WARPGROUP.DEPBAR.LE gsb0, 0x1", "FMNMX", "FFMA", "MUFU.EX2",
                  "WARPGROUP.DEPBAR.LE gsb0, 0x0", "FMNMX", "FFMA", "MUFU.EX2", "MUFU.EX2", "FMUL", "BRA 0x100")
    words = S.landmarks(body)
    assert "top to first HGMMA 0" in words and "last MUFU to back-branch 2" in words
    assert "before the last wgmma wait: MUFU 1/3, FFMA 1/2, FMNMX 1/2" in words


def test_waits_on_loads_issued_together_are_one_round_trip_and_a_later_load_is_another():
    insts = _insts("LDG.E", "LDG.E", "FADD", "FADD", "LDG.E", "FADD", "STG.E")
    # (scoreboard set, mask waited on): two loads on scoreboards 0 and 1; their uses; a third load on 0, its use
    sb = {0x100: (0, 0), 0x110: (1, 0), 0x120: (7, 0b01), 0x130: (7, 0b10), 0x140: (0, 0), 0x150: (7, 0b01)}
    waits = S.memory_waits(insts, sb, 0x100, 0x160)
    assert [(a, fresh) for a, _, fresh in waits] == [(0x120, True), (0x130, False), (0x150, True)]
    assert S.memory_waits(insts, sb, 0x140, 0x160) == [(0x150, ["LDG.E"], True)]  # only what the range issues
