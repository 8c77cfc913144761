"""The table of which kernel serves which shape (kernels/attention/dispatch.py's docstring) is the
one SHAPE_RULES make: a rule that changes without the table fails here."""
from kernels.attention import dispatch, route_table


def test_the_dispatch_docstring_holds_the_table_the_rules_make():
    assert route_table.table() in dispatch.__doc__, (
        "kernels/attention/dispatch.py's table is stale: paste `python -m kernels.attention.route_table` into its docstring")


def test_the_table_has_a_row_per_rule_and_routes_each_row_as_the_rules_do():
    rows = route_table.rows()
    assert len(rows) == len(dispatch.SHAPE_RULES) + 1
    for rule, (label, path, version, kernel) in zip(dispatch.SHAPE_RULES, rows):
        n = rule.min_len if rule.max_len is None else rule.max_len
        # the row's smallest head size: one the rule takes and no earlier rule does ("d 72-96, causal, ...")
        d = int(label.split(",")[0].split()[1].split("-")[0])
        batch_heads = -(-rule.min_rows // n)  # enough rows for the rule's min_rows
        want_path, config = dispatch.rule_route(dispatch.SHAPE_RULES, d, rule.causal, n, batch_heads=batch_heads)
        assert (path, version) == (want_path, (config or {}).get("version", "-"))
        # the kernel function lives in the path's own module (the Gluon path's kernels in gluon_tile.py and gluon_ws.py)
        assert kernel.split(".")[0] in ({"gluon_tile", "gluon_ws"} if path == "gluon" else {path})
    assert rows[-1][1] == dispatch.AUTO_ORDER[0]


def test_a_rule_for_part_of_a_tile_is_printed_with_its_head_sizes_and_leaves_the_rest_to_the_next_rule():
    rules = {row[0]: row[2] for row in route_table.rows()}
    assert rules["d 72-80, non-causal, any N"] == "g30" and rules["d 88-96, non-causal, N <= 2047"] == "g27"
    assert rules["d 88-96, non-causal, N >= 2048"] == "g41" and rules["d 72-96, causal, any N"] == "g37"
    assert rules["d 104-128, non-causal, N >= 2048"] == "g32" and rules["d 104-128, non-causal, N <= 2047"] == "g37"
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 96, False, 4096)[1] == {"version": "g41"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 104, False, 4096)[1] == {"version": "g32"}
    # below N=2048 the short walks of d=104-128 take the lean mask; d=72-96 keep their own rules at every length
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 104, False, 1024)[1] == {"version": "g37"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 96, False, 1024)[1] == {"version": "g27"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 80, False, 512)[1] == {"version": "g30"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 128, True, 4096)[1] == {"version": "g42"}
    assert dispatch.rule_route(dispatch.SHAPE_RULES, 80, True, 4096)[1] == {"version": "g37"}


def test_a_rule_with_min_rows_takes_a_shape_only_when_batch_heads_and_length_fill_the_gpu_many_times():
    route = dispatch.rule_route
    # B=2 H=8 N=16384 and B=8 H=16 N=2048 are 2^18 query rows: 192-row tiles fill 132 SMs ten times over
    assert route(dispatch.SHAPE_RULES, 64, False, 16384, batch_heads=16)[1] == {"version": "g33"}
    assert route(dispatch.SHAPE_RULES, 64, False, 2048, batch_heads=128)[1] == {"version": "g33"}
    # half the rows (B=2 H=8 N=8192), or one head at N=16384: g8's smaller tiles
    assert route(dispatch.SHAPE_RULES, 64, False, 8192, batch_heads=16)[1] == {"version": "g8"}
    assert route(dispatch.SHAPE_RULES, 64, False, 16384)[1] == {"version": "g8"}
    # causal needs long rows too: at N=2048 each tile's walk is short, whatever the batch
    assert route(dispatch.SHAPE_RULES, 64, True, 8192, batch_heads=16)[1] == {"version": "g36"}
    assert route(dispatch.SHAPE_RULES, 64, True, 8192, batch_heads=8)[1] == {"version": "g38"}
    assert route(dispatch.SHAPE_RULES, 64, True, 2048, batch_heads=128)[1] == {"version": "g38"}


def test_the_shipped_version_names_only_kernels_the_rules_route_and_every_one_new_to_it():
    # v63's words once named two kernels its rules had already sent back (the run's record had to be corrected): the
    # shipped version's change may name only steps SHAPE_RULES route, and must name each step the version before it
    # did not route.
    import re

    from kernels.attention import versions as V

    routed = {dict(r.config)["version"] for r in dispatch.SHAPE_RULES if r.path == "gluon"}
    final = V.get_version(V.FINAL_VERSION)
    named = set(re.findall(r"\bg\d+\b", final.change))
    assert named <= routed, f"{V.FINAL_VERSION}'s change names {sorted(named - routed)}, which no rule routes"
    names = list(V.VERSIONS)
    before = next(V.VERSIONS[n] for n in reversed(names[:names.index(V.FINAL_VERSION)]) if V.VERSIONS[n].routes)
    shapes = [(d, c, n, bh) for d in (64, 80, 96, 128) for c in (False, True) for n in (512, 2048, 16384)
              for bh in (1, 4096)]
    previously = {before.routes(d, c, n, batch_heads=bh)[1]["version"] for d, c, n, bh in shapes
                  if before.routes(d, c, n, batch_heads=bh)[0] == "gluon"}
    assert routed - previously <= named, f"{V.FINAL_VERSION}'s change does not name {sorted(routed - previously - named)}"
